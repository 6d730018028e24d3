/*
 * lidar-fmu's FMI 3.0 status shim (Linux): the FMU's binary, in front of pythonfmu3's.
 *
 * Why: pythonfmu3 (0.3.4) gives a Python slave a status of its own in fmi3DoStep only: any other callback either
 * returns (fmi3OK) or raises (fmi3Fatal, which ends the co-simulation); it has no Binary variables; it throws a C++
 * exception through C ("not implemented": the host aborts) from most functions a co-simulation model has no use
 * for; it keeps no state machine and dereferences what a master passes without looking. A master's misuse must be
 * refused with fmi3Error, the reason logged, and leave the instance usable (FMI 3.0, sections 2.2.3 and 2.3, the
 * co-simulation state machine of section 4.2).
 *
 * How: the master holds the shim's Instance, which wraps pythonfmu3's (loaded from beside this library as
 * <this library's name without .so>.pythonfmu3.so) and tracks the FMI state: Instantiated, Initialization Mode,
 * Step Mode, Terminated (Event, Configuration and Intermediate Update Mode are never entered here).
 * - Each function the model supports is forwarded when the state allows it (the Reference FMUs' reading of the
 *   standard) and its arguments are sound (no NULL arrays, one value per value reference: every variable is a
 *   scalar); otherwise, and for every function the model does not support (clocks, FMU state, Event and
 *   Configuration Mode, Model Exchange, Scheduled Execution, types it has no variables of), fmi3Error with one
 *   line naming the function and the reason, and nothing reaches pythonfmu3.
 * - Status: when pythonfmu3 answers fmi3OK, the shim reads the slave's Int32 variable with value reference 0
 *   (fmi3_status_of_last_call, registered first by fmu/LidarSensorFmi3.py), which holds the worst status the
 *   slave gave the call and is reset by that read, and returns it. After fmi3Fatal only fmi3FreeInstance is left.
 * - Binary: fmi3GetBinary / fmi3SetBinary of value references vr[i] become pythonfmu3's fmi3GetUInt64 /
 *   fmi3SetUInt64 of vr[i] | BINARY_CHANNEL with two values per variable, the bytes' address and size; no variable
 *   has such a value reference, and a master's own calls with one are refused here. The slave copies what is set
 *   during the call and hands out buffers that stay valid past the FMU's next call (FMI 3.0, section 2.2.6.2).
 * - Logging: pythonfmu3 logs through the shim (its debug logging always on), which passes fmi3Error and fmi3Fatal
 *   messages to the master always and the others while the master's debug logging is on, for the categories it
 *   named (pythonfmu3 alone would drop errors outside the named categories, and call a NULL logger).
 *
 * Our own code (MPL-2.0, like the rest of lidar-fmu), compiled against the FMI 3.0 headers pythonfmu3 ships
 * (fmi3Functions.h, 2-Clause BSD License, Modelica Association Project "FMI").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define STATUS_VR 0u
#define BINARY_CHANNEL 0x80000000u
#define MAX_MESSAGE 600 /* characters of one refusal: one line */

#define INNER_SUFFIX ".pythonfmu3.so"
#include "status_shim_inner.h"

static const fmi3Byte empty_binary[1] = {0}; /* what an empty Binary points at: a valid address, size 0 */

/* The co-simulation states this FMU can be in (bits, so that a set of them is a mask); FAILED: after fmi3Fatal. */
enum { INSTANTIATED = 1, INITIALIZATION_MODE = 2, STEP_MODE = 4, TERMINATED = 8, FAILED = 16 };
static const char *const STATE_NAMES[] = {"Instantiated", "Initialization Mode", "Step Mode", "Terminated",
                                          "Failed"};
#define N_STATES (sizeof STATE_NAMES / sizeof STATE_NAMES[0])
#define GETTABLE (INSTANTIATED | INITIALIZATION_MODE | STEP_MODE | TERMINATED)
#define SETTABLE (INSTANTIATED | INITIALIZATION_MODE | STEP_MODE)
#define ANY_STATE GETTABLE

/* One instance as the master holds it: pythonfmu3's, its state, and what the master asked of logging. */
typedef struct {
    fmi3Instance inner;
    int state;
    fmi3LogMessageCallback log_message; /* the master's (may be NULL) */
    fmi3InstanceEnvironment environment;
    int debug_logging; /* the master's loggingOn / fmi3SetDebugLogging */
    unsigned categories; /* bit k: CATEGORIES[k] asked for; 0: all */
} Instance;

/* pythonfmu3's logger: errors always reach the master, the rest as its debug logging says. */
static void log_to_master(fmi3InstanceEnvironment environment, fmi3Status status, fmi3String category,
                          fmi3String message) {
    const Instance *self = environment;
    if (!self || !self->log_message) return;
    if (passed_on(status == fmi3Error || status == fmi3Fatal, category, self->debug_logging, self->categories))
        self->log_message(self->environment, status, category, message ? message : "");
}

/* Refuse the call: one line to the master's logger (``function`` refused: why), fmi3Error. */
__attribute__((format(printf, 3, 4))) static fmi3Status refuse(const Instance *self, const char *function,
                                                               const char *why, ...) {
    char message[MAX_MESSAGE];
    int n = snprintf(message, sizeof message, "%s refused: ", function);
    va_list args;
    va_start(args, why);
    if (n > 0 && (size_t)n < sizeof message) vsnprintf(message + n, sizeof message - (size_t)n, why, args);
    va_end(args);
    if (self && self->log_message) self->log_message(self->environment, fmi3Error, "logStatusError", message);
    return fmi3Error;
}

/* "A, B or C": the states of ``mask``, into ``out``. */
static const char *state_list(int mask, char *out, size_t size) {
    size_t used = 0, count = 0, total = 0;
    for (size_t k = 0; k < N_STATES; k++) total += (mask >> k) & 1;
    out[0] = '\0';
    for (size_t k = 0; k < N_STATES && used < size; k++) {
        if (!((mask >> k) & 1)) continue;
        const char *glue = count == 0 ? "" : (count + 1 == total ? " or " : ", ");
        int n = snprintf(out + used, size - used, "%s%s", glue, STATE_NAMES[k]);
        used += n > 0 ? (size_t)n : 0;
        count++;
    }
    return out;
}

static const char *state_name(int state) {
    for (size_t k = 0; k < N_STATES; k++)
        if (state == 1 << k) return STATE_NAMES[k];
    return "unknown";
}

/* Whether ``function`` may be called in the instance's state (refused with the reason if not). */
static int allowed(const Instance *self, const char *function, int mask) {
    if (!self) return 0; /* no instance: nothing to log to */
    if (self->state == FAILED) {
        refuse(self, function, "an earlier call returned fmi3Fatal; FMI 3.0 allows only fmi3FreeInstance now");
        return 0;
    }
    if (!(self->state & mask)) {
        char states[160];
        refuse(self, function, "called in state %s; FMI 3.0 allows it only in %s. Nothing changed.",
               state_name(self->state), state_list(mask, states, sizeof states));
        return 0;
    }
    return 1;
}

/* The call's status: the slave's own record of it when pythonfmu3 says fmi3OK; fmi3Fatal ends the instance. */
static fmi3Status settle(Instance *self, fmi3Status status) {
    if (status == fmi3OK) {
        fmi3GetInt32TYPE *get = (fmi3GetInt32TYPE *)real("fmi3GetInt32");
        const fmi3ValueReference vr = STATUS_VR;
        fmi3Int32 recorded = fmi3OK;
        if (get && get(self->inner, &vr, 1, &recorded, 1) == fmi3OK &&
            (recorded == fmi3Warning || recorded == fmi3Error))
            status = (fmi3Status)recorded;
    }
    if (status == fmi3Fatal) self->state = FAILED;
    return status;
}

/* Forward the enclosing function ``name`` to pythonfmu3's when the state is in ``mask``, and settle its status. */
#define FORWARD(name, mask, ...)                                                                      \
    Instance *self = instance;                                                                        \
    if (!allowed(self, #name, mask)) return fmi3Error;                                                \
    name##TYPE *fn = (name##TYPE *)real(#name);                                                       \
    if (!fn) return refuse(self, #name, "pythonfmu3's library (LidarSensor.pythonfmu3.so) did not load"); \
    return settle(self, fn(self->inner, ##__VA_ARGS__))

/* Whether a get or set of ``n_vr`` scalars is sound: arrays given, one value each, no value reference of the
 * Binary channel (refused with the reason if not). */
static int sound(const Instance *self, const char *function, const fmi3ValueReference vr[], size_t n_vr,
                 const void *values, size_t n_values) {
    if (n_vr > 0 && (!vr || !values)) {
        refuse(self, function, "a NULL %s array with nValueReferences = %zu", vr ? "values" : "valueReferences", n_vr);
        return 0;
    }
    for (size_t i = 0; i < n_vr; i++) {
        if (vr[i] & BINARY_CHANNEL) {
            refuse(self, function, "no variable has value reference %u", vr[i]);
            return 0;
        }
    }
    if (n_values != n_vr) {
        refuse(self, function, "nValues = %zu for nValueReferences = %zu: every variable of this FMU is a scalar "
               "(one value each)", n_values, n_vr);
        return 0;
    }
    return 1;
}

/* Refuse ``function`` of a capability the FMU does not have (``why``), in any state. */
static fmi3Status unsupported(const Instance *self, const char *function, const char *why) {
    return self ? refuse(self, function, "%s. Nothing changed.", why) : fmi3Error;
}
#define NO_CLOCKS "this FMU has no clocks"
#define NO_EVENT_MODE "this FMU has no Event Mode (hasEventMode is false)"
#define NO_FMU_STATE "this FMU cannot get or set its state (canGetAndSetFMUState is false)"
#define NO_SERIALIZATION "this FMU cannot serialize its state (canSerializeFMUState is false)"
#define NO_MODEL_EXCHANGE "a Model Exchange function; this FMU is for co-simulation only"

/* -- inquire the version, set debug logging, instantiate, free ------------------------------------------------ */
FMI3_Export const char *fmi3GetVersion(void) { return fmi3Version; }

FMI3_Export fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean on, size_t n,
                                           const fmi3String categories[]) {
    Instance *self = instance;
    if (!allowed(self, "fmi3SetDebugLogging", ANY_STATE)) return fmi3Error;
    if (n > 0 && !categories)
        return refuse(self, "fmi3SetDebugLogging", "a NULL categories array with nCategories = %zu", n);
    unsigned asked = 0;
    for (size_t i = 0; i < n; i++) {
        int k = category_index(categories[i]);
        if (k < 0)
            return refuse(self, "fmi3SetDebugLogging", "unknown log category %s%.80s%s (the model description's: "
                          "logStatusWarning, logStatusDiscard, logStatusError, logStatusFatal, logAll). Nothing "
                          "changed.", categories[i] ? "\"" : "", categories[i] ? categories[i] : "NULL",
                          categories[i] ? "\"" : "");
        asked |= 1u << k;
    }
    self->debug_logging = on ? 1 : 0;
    self->categories = asked;
    return fmi3OK;
}

FMI3_Export fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources,
                                                     fmi3Boolean visible, fmi3Boolean logging_on,
                                                     fmi3Boolean event_mode_used, fmi3Boolean early_return_allowed,
                                                     const fmi3ValueReference required[], size_t n_required,
                                                     fmi3InstanceEnvironment environment,
                                                     fmi3LogMessageCallback log_message,
                                                     fmi3IntermediateUpdateCallback intermediate_update) {
    (void)intermediate_update; /* never called: this FMU does not return early nor update intermediately */
    Instance master = {NULL, INSTANTIATED, log_message, environment, logging_on ? 1 : 0, 0};
    if (event_mode_used) { /* FMI 3.0: eventModeUsed only where hasEventMode, "otherwise the FMU must raise an error" */
        refuse(&master, "fmi3InstantiateCoSimulation", "eventModeUsed is true, but " NO_EVENT_MODE);
        return NULL;
    }
    if (n_required > 0) {
        refuse(&master, "fmi3InstantiateCoSimulation", "%zu requiredIntermediateVariables, but no variable of this "
               "FMU has intermediateUpdate", n_required);
        return NULL;
    }
    fmi3InstantiateCoSimulationTYPE *fn = (fmi3InstantiateCoSimulationTYPE *)real("fmi3InstantiateCoSimulation");
    Instance *self = fn ? malloc(sizeof *self) : NULL;
    if (!self) {
        refuse(&master, "fmi3InstantiateCoSimulation", fn ? "out of memory" : "pythonfmu3's library did not load");
        return NULL;
    }
    *self = master;
    /* pythonfmu3 logs through the shim (self is its environment), its debug logging on: the shim filters */
    self->inner = fn(name, token, resources, visible, fmi3True, fmi3False, early_return_allowed, required, 0, self,
                     log_to_master, NULL);
    if (!self->inner) {
        free(self);
        return NULL;
    }
    return self;
}

FMI3_Export fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token, fmi3String resources,
                                                      fmi3Boolean visible, fmi3Boolean logging_on,
                                                      fmi3InstanceEnvironment environment,
                                                      fmi3LogMessageCallback log_message) {
    (void)name, (void)token, (void)resources, (void)visible, (void)logging_on;
    Instance master = {NULL, INSTANTIATED, log_message, environment, 0, 0};
    refuse(&master, "fmi3InstantiateModelExchange", "this FMU is for co-simulation only");
    return NULL;
}

FMI3_Export fmi3Instance fmi3InstantiateScheduledExecution(fmi3String name, fmi3String token, fmi3String resources,
                                                           fmi3Boolean visible, fmi3Boolean logging_on,
                                                           fmi3InstanceEnvironment environment,
                                                           fmi3LogMessageCallback log_message,
                                                           fmi3ClockUpdateCallback clock_update,
                                                           fmi3LockPreemptionCallback lock,
                                                           fmi3UnlockPreemptionCallback unlock) {
    (void)name, (void)token, (void)resources, (void)visible, (void)logging_on, (void)clock_update, (void)lock,
        (void)unlock;
    Instance master = {NULL, INSTANTIATED, log_message, environment, 0, 0};
    refuse(&master, "fmi3InstantiateScheduledExecution", "this FMU is for co-simulation only");
    return NULL;
}

FMI3_Export void fmi3FreeInstance(fmi3Instance instance) {
    Instance *self = instance;
    if (!self) return; /* FMI 3.0: a NULL instance is ignored */
    fmi3FreeInstanceTYPE *fn = (fmi3FreeInstanceTYPE *)real("fmi3FreeInstance");
    if (fn && self->inner) fn(self->inner);
    free(self);
}

/* -- the calling sequence -------------------------------------------------------------------------------------- */
FMI3_Export fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean tolerance_defined,
                                                   fmi3Float64 tolerance, fmi3Float64 start,
                                                   fmi3Boolean stop_defined, fmi3Float64 stop) {
    Instance *self = instance;
    if (!allowed(self, "fmi3EnterInitializationMode", INSTANTIATED)) return fmi3Error;
    fmi3EnterInitializationModeTYPE *fn = (fmi3EnterInitializationModeTYPE *)real("fmi3EnterInitializationMode");
    if (!fn) return refuse(self, "fmi3EnterInitializationMode", "pythonfmu3's library did not load");
    fmi3Status status = settle(self, fn(self->inner, tolerance_defined, tolerance, start, stop_defined, stop));
    if (status <= fmi3Warning) self->state = INITIALIZATION_MODE;
    return status;
}

/* Forward a transition of the calling sequence from the states of ``mask`` to state ``to`` (taken when the slave
 * took it: unless fmi3Fatal, as a model that cannot start is in Step Mode and says so at each step). */
static fmi3Status transition(Instance *self, const char *function, int mask, int to) {
    if (!allowed(self, function, mask)) return fmi3Error;
    fmi3ExitInitializationModeTYPE *fn = (fmi3ExitInitializationModeTYPE *)real(function); /* (instance) → status */
    if (!fn) return refuse(self, function, "pythonfmu3's library did not load");
    fmi3Status status = settle(self, fn(self->inner));
    if (status != fmi3Fatal) self->state = to;
    return status;
}

FMI3_Export fmi3Status fmi3ExitInitializationMode(fmi3Instance instance) {
    return transition(instance, "fmi3ExitInitializationMode", INITIALIZATION_MODE, STEP_MODE);
}

FMI3_Export fmi3Status fmi3Terminate(fmi3Instance instance) {
    return transition(instance, "fmi3Terminate", STEP_MODE, TERMINATED);
}

/* FMI 3.0: from any state of FMU State Settable back to Instantiated, as if instantiated anew (pythonfmu3 starts
 * a fresh slave). */
FMI3_Export fmi3Status fmi3Reset(fmi3Instance instance) {
    return transition(instance, "fmi3Reset", ANY_STATE, INSTANTIATED);
}

FMI3_Export fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 time, fmi3Float64 step,
                                  fmi3Boolean no_set_state_before, fmi3Boolean *event_handling_needed,
                                  fmi3Boolean *terminate, fmi3Boolean *early_return, fmi3Float64 *last_successful) {
    fmi3Boolean event_local = fmi3False, terminate_local = fmi3False, early_local = fmi3False;
    fmi3Float64 last_local = time;
    /* pythonfmu3 writes through these unchecked: a master's NULL gets the shim's own */
    event_handling_needed = event_handling_needed ? event_handling_needed : &event_local;
    terminate = terminate ? terminate : &terminate_local;
    early_return = early_return ? early_return : &early_local;
    last_successful = last_successful ? last_successful : &last_local;
    *event_handling_needed = *terminate = *early_return = fmi3False;
    *last_successful = time;
    FORWARD(fmi3DoStep, STEP_MODE, time, step, no_set_state_before, event_handling_needed, terminate, early_return,
            last_successful);
}

/* The functions of what this FMU does not have: fmi3Error with ``why`` logged whatever the arguments (which they
 * leave alone, so the compiler is told not to mind them). */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define REFUSED(name, why, ...) \
    FMI3_Export fmi3Status name(fmi3Instance instance, ##__VA_ARGS__) { return unsupported(instance, #name, why); }

REFUSED(fmi3EnterEventMode, NO_EVENT_MODE)
REFUSED(fmi3EnterStepMode, "allowed from Event Mode only, and " NO_EVENT_MODE
        " (fmi3ExitInitializationMode enters Step Mode)")
REFUSED(fmi3EvaluateDiscreteStates, "allowed in Event Mode only, and " NO_EVENT_MODE)
REFUSED(fmi3UpdateDiscreteStates, "allowed in Event Mode only, and " NO_EVENT_MODE, fmi3Boolean *need_update,
        fmi3Boolean *terminate, fmi3Boolean *nominals_changed, fmi3Boolean *values_changed,
        fmi3Boolean *next_time_defined, fmi3Float64 *next_time)
REFUSED(fmi3EnterConfigurationMode, "this FMU has no structural parameters")
REFUSED(fmi3ExitConfigurationMode, "this FMU has no structural parameters, so it is never in Configuration Mode")

/* -- variables: the types the model has are forwarded; of the others it has no variable ------------------------- */
#define GET(type)                                                                                        \
    FMI3_Export fmi3Status fmi3Get##type(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr, \
                                         fmi3##type values[], size_t n_values) {                         \
        if (!sound(instance, "fmi3Get" #type, vr, n_vr, values, n_values)) return fmi3Error;             \
        FORWARD(fmi3Get##type, GETTABLE, vr, n_vr, values, n_values);                                    \
    }
#define SET(type)                                                                                        \
    FMI3_Export fmi3Status fmi3Set##type(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr, \
                                         const fmi3##type values[], size_t n_values) {                   \
        if (!sound(instance, "fmi3Set" #type, vr, n_vr, values, n_values)) return fmi3Error;             \
        FORWARD(fmi3Set##type, SETTABLE, vr, n_vr, values, n_values);                                    \
    }
#define GET_SET(type) GET(type) SET(type)
GET_SET(Float64)
GET_SET(Int32)
GET_SET(Int64) /* (none: the slave refuses each by type or value reference, naming the variable) */
GET_SET(UInt64) /* (none: the same; its Binary channel is the shim's alone, refused in ``sound``) */
GET_SET(Boolean)
GET_SET(String)

/* A get or set of a type no variable of this FMU has: nothing asked is fine, anything else has no variable. */
static fmi3Status no_variables(Instance *self, const char *function, const char *type, int mask,
                               const fmi3ValueReference vr[], size_t n_vr, const void *values, size_t n_values) {
    if (!sound(self, function, vr, n_vr, values, n_values) || !allowed(self, function, mask)) return fmi3Error;
    if (n_vr == 0) return fmi3OK;
    return refuse(self, function, "no %s variable has value reference %u (this FMU has no %s variables). Nothing "
                  "changed.", type, vr[0], type);
}
#define NONE_OF(type)                                                                                     \
    FMI3_Export fmi3Status fmi3Get##type(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr, \
                                         fmi3##type values[], size_t n_values) {                          \
        return no_variables(instance, "fmi3Get" #type, #type, GETTABLE, vr, n_vr, values, n_values);      \
    }                                                                                                     \
    FMI3_Export fmi3Status fmi3Set##type(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr, \
                                         const fmi3##type values[], size_t n_values) {                    \
        return no_variables(instance, "fmi3Set" #type, #type, SETTABLE, vr, n_vr, values, n_values);      \
    }
NONE_OF(Float32)
NONE_OF(Int8)
NONE_OF(UInt8)
NONE_OF(Int16)
NONE_OF(UInt16)
NONE_OF(UInt32)

/* The value references of the Binary channel: each of ``vr`` with the top bit set (NULL: no memory). */
static fmi3ValueReference *channel(const fmi3ValueReference vr[], size_t n) {
    fmi3ValueReference *out = malloc((n ? n : 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++) out[i] = vr[i] | BINARY_CHANNEL;
    return out;
}

FMI3_Export fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                     size_t sizes[], fmi3Binary values[], size_t n_values) {
    Instance *self = instance;
    if (!sound(self, "fmi3GetBinary", vr, n_vr, values, n_values) || !allowed(self, "fmi3GetBinary", GETTABLE))
        return fmi3Error;
    if (n_vr > 0 && !sizes)
        return refuse(self, "fmi3GetBinary", "a NULL valueSizes array with nValueReferences = %zu", n_vr);
    fmi3GetUInt64TYPE *fn = (fmi3GetUInt64TYPE *)real("fmi3GetUInt64");
    fmi3ValueReference *refs = channel(vr, n_vr);
    fmi3UInt64 *pairs = calloc(2 * n_vr + 1, sizeof *pairs);
    fmi3Status status;
    if (fn && refs && pairs) {
        status = settle(self, fn(self->inner, refs, n_vr, pairs, 2 * n_vr));
        for (size_t i = 0; i < n_vr; i++) {
            uintptr_t address = (uintptr_t)pairs[2 * i];
            sizes[i] = address ? (size_t)pairs[2 * i + 1] : 0;
            values[i] = address ? (fmi3Binary)address : empty_binary;
        }
    } else {
        status = refuse(self, "fmi3GetBinary", fn ? "out of memory" : "pythonfmu3's library did not load");
    }
    free(refs);
    free(pairs);
    return status;
}

FMI3_Export fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                     const size_t sizes[], const fmi3Binary values[], size_t n_values) {
    Instance *self = instance;
    if (!sound(self, "fmi3SetBinary", vr, n_vr, values, n_values) || !allowed(self, "fmi3SetBinary", SETTABLE))
        return fmi3Error;
    if (n_vr > 0 && !sizes)
        return refuse(self, "fmi3SetBinary", "a NULL valueSizes array with nValueReferences = %zu", n_vr);
    fmi3SetUInt64TYPE *fn = (fmi3SetUInt64TYPE *)real("fmi3SetUInt64");
    fmi3ValueReference *refs = channel(vr, n_vr);
    fmi3UInt64 *pairs = calloc(2 * n_vr + 1, sizeof *pairs);
    fmi3Status status;
    if (fn && refs && pairs) {
        for (size_t i = 0; i < n_vr; i++) {
            pairs[2 * i] = (fmi3UInt64)(uintptr_t)values[i];
            pairs[2 * i + 1] = values[i] ? (fmi3UInt64)sizes[i] : 0;
        }
        status = settle(self, fn(self->inner, refs, n_vr, pairs, 2 * n_vr));
    } else {
        status = refuse(self, "fmi3SetBinary", fn ? "out of memory" : "pythonfmu3's library did not load");
    }
    free(refs);
    free(pairs);
    return status;
}

/* -- clocks: none ------------------------------------------------------------------------------------------- */
#define VRS const fmi3ValueReference vr[], size_t n_vr
REFUSED(fmi3GetClock, NO_CLOCKS, VRS, fmi3Clock values[])
REFUSED(fmi3SetClock, NO_CLOCKS, VRS, const fmi3Clock values[])
REFUSED(fmi3GetIntervalDecimal, NO_CLOCKS, VRS, fmi3Float64 intervals[], fmi3IntervalQualifier qualifiers[])
REFUSED(fmi3GetIntervalFraction, NO_CLOCKS, VRS, fmi3UInt64 counters[], fmi3UInt64 resolutions[],
        fmi3IntervalQualifier qualifiers[])
REFUSED(fmi3GetShiftDecimal, NO_CLOCKS, VRS, fmi3Float64 shifts[])
REFUSED(fmi3GetShiftFraction, NO_CLOCKS, VRS, fmi3UInt64 counters[], fmi3UInt64 resolutions[])
REFUSED(fmi3SetIntervalDecimal, NO_CLOCKS, VRS, const fmi3Float64 intervals[])
REFUSED(fmi3SetIntervalFraction, NO_CLOCKS, VRS, const fmi3UInt64 counters[], const fmi3UInt64 resolutions[])
REFUSED(fmi3SetShiftDecimal, NO_CLOCKS, VRS, const fmi3Float64 shifts[])
REFUSED(fmi3SetShiftFraction, NO_CLOCKS, VRS, const fmi3UInt64 counters[], const fmi3UInt64 resolutions[])
REFUSED(fmi3ActivateModelPartition, "a Scheduled Execution function; this FMU is for co-simulation only",
        fmi3ValueReference clock, fmi3Float64 activation_time)

/* -- dependencies, derivatives, FMU state: capabilities the model description says the FMU does not have ------- */
#define NO_DEPENDENCIES "providesPerElementDependencies is false (the model description's ModelStructure has them)"
REFUSED(fmi3GetNumberOfVariableDependencies, NO_DEPENDENCIES, fmi3ValueReference vr, size_t *n)
REFUSED(fmi3GetVariableDependencies, NO_DEPENDENCIES, fmi3ValueReference dependent, size_t element_of_dependent[],
        fmi3ValueReference independents[], size_t element_of_independents[], fmi3DependencyKind kinds[], size_t n)
#define DERIVATIVE_ARGUMENTS                                                                                   \
    const fmi3ValueReference unknowns[], size_t n_unknowns, const fmi3ValueReference knowns[], size_t n_knowns, \
        const fmi3Float64 seed[], size_t n_seed, fmi3Float64 sensitivity[], size_t n_sensitivity
REFUSED(fmi3GetDirectionalDerivative, "providesDirectionalDerivatives is false", DERIVATIVE_ARGUMENTS)
REFUSED(fmi3GetAdjointDerivative, "providesAdjointDerivatives is false", DERIVATIVE_ARGUMENTS)
REFUSED(fmi3GetOutputDerivatives, "maxOutputDerivativeOrder is 0", VRS, const fmi3Int32 orders[],
        fmi3Float64 values[], size_t n_values)
REFUSED(fmi3GetFMUState, NO_FMU_STATE, fmi3FMUState *state)
REFUSED(fmi3SetFMUState, NO_FMU_STATE, fmi3FMUState state)
REFUSED(fmi3FreeFMUState, NO_FMU_STATE, fmi3FMUState *state)
REFUSED(fmi3SerializedFMUStateSize, NO_SERIALIZATION, fmi3FMUState state, size_t *size)
REFUSED(fmi3SerializeFMUState, NO_SERIALIZATION, fmi3FMUState state, fmi3Byte bytes[], size_t size)
REFUSED(fmi3DeserializeFMUState, NO_SERIALIZATION, const fmi3Byte bytes[], size_t size, fmi3FMUState *state)

/* -- Model Exchange's functions ---------------------------------------------------------------------------- */
REFUSED(fmi3EnterContinuousTimeMode, NO_MODEL_EXCHANGE)
REFUSED(fmi3CompletedIntegratorStep, NO_MODEL_EXCHANGE, fmi3Boolean no_set_state_before,
        fmi3Boolean *enter_event_mode, fmi3Boolean *terminate)
REFUSED(fmi3SetTime, NO_MODEL_EXCHANGE, fmi3Float64 time)
REFUSED(fmi3SetContinuousStates, NO_MODEL_EXCHANGE, const fmi3Float64 states[], size_t n)
REFUSED(fmi3GetContinuousStateDerivatives, NO_MODEL_EXCHANGE, fmi3Float64 derivatives[], size_t n)
REFUSED(fmi3GetEventIndicators, NO_MODEL_EXCHANGE, fmi3Float64 indicators[], size_t n)
REFUSED(fmi3GetContinuousStates, NO_MODEL_EXCHANGE, fmi3Float64 states[], size_t n)
REFUSED(fmi3GetNominalsOfContinuousStates, NO_MODEL_EXCHANGE, fmi3Float64 nominals[], size_t n)
REFUSED(fmi3GetNumberOfEventIndicators, NO_MODEL_EXCHANGE, size_t *n)
REFUSED(fmi3GetNumberOfContinuousStates, NO_MODEL_EXCHANGE, size_t *n)
