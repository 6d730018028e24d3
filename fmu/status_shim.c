/*
 * lidar-fmu's FMI 2.0 status shim (Linux): the FMU's binary, in front of pythonfmu's.
 *
 * Why: pythonfmu 0.7.0 gives a Python slave no way to return fmi2Warning or
 * fmi2Error: a callback either returns (fmi2OK) or raises (fmi2Fatal, which
 * ends the co-simulation). A master's misuse (a call in the wrong state, an
 * unknown value reference, a write to a fixed parameter after initialization)
 * must be refused with fmi2Error and leave the instance usable (FMI 2.0,
 * section 2.1.3 and the state machine of section 4.2.4).
 *
 * How: every fmi2* call is forwarded to pythonfmu's library, loaded from
 * beside this one (<this library's name without .so>.pythonfmu.so). When it
 * answers fmi2OK, the shim reads the slave's Integer variable with value
 * reference 0 (fmi2_status_of_last_call, registered first by fmu/LidarSensor.py),
 * which holds the worst status the slave gave the call and is reset by that
 * read, and returns it. What pythonfmu would crash on or answer wrongly the shim
 * refuses itself with fmi2Error and the reason logged: a get or set with a NULL
 * array, and the FMU state functions (canGetAndSetFMUstate is false).
 *
 * Logging: pythonfmu 0.7.0 passes a message to the master's logger only while
 * debug logging is on, so with loggingOn = fmi2False (FMPy's default, many
 * masters') an fmi2Error came without its reason. The shim gives pythonfmu its
 * own logger with debug logging always on and decides itself, as the FMI
 * reference FMUs do: fmi2Error and fmi2Fatal messages always reach the master;
 * the others only while the master's debug logging is on (fmi2Instantiate's
 * loggingOn, fmi2SetDebugLogging) and, if it named categories, for those. A
 * component the master holds is the shim's (Instance) wrapping pythonfmu's.
 * Arguments and messages pass through as they are.
 *
 * Our own code (MPL-2.0, like the rest of lidar-fmu); FMI 2.0's types are
 * declared here as the standard defines them (fmi2TypesPlatform.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *fmi2Component;
typedef void *fmi2FMUstate;
typedef unsigned int fmi2ValueReference;
typedef double fmi2Real;
typedef int fmi2Integer;
typedef int fmi2Boolean;
typedef char fmi2Char;
typedef const fmi2Char *fmi2String;
typedef char fmi2Byte;
typedef enum { fmi2OK, fmi2Warning, fmi2Discard, fmi2Error, fmi2Fatal, fmi2Pending } fmi2Status;
typedef int fmi2Type;
typedef int fmi2StatusKind;
typedef void *fmi2ComponentEnvironment;
typedef void (*fmi2CallbackLogger)(fmi2ComponentEnvironment, fmi2String, fmi2Status, fmi2String, fmi2String, ...);
typedef void *(*fmi2CallbackAllocateMemory)(size_t, size_t);
typedef void (*fmi2CallbackFreeMemory)(void *);
typedef void (*fmi2StepFinished)(fmi2ComponentEnvironment, fmi2Status);
typedef struct {
    fmi2CallbackLogger logger;
    fmi2CallbackAllocateMemory allocateMemory;
    fmi2CallbackFreeMemory freeMemory;
    fmi2StepFinished stepFinished;
    fmi2ComponentEnvironment componentEnvironment;
} fmi2CallbackFunctions;

#define EXPORT __attribute__((visibility("default")))
#define STATUS_VR 0u

#define INNER_SUFFIX ".pythonfmu.so"
#include "status_shim_inner.h"

/* One instance as the master holds it: pythonfmu's, and what the master asked of logging. */
typedef struct {
    fmi2Component inner;
    fmi2CallbackFunctions to_inner;   /* the master's callbacks with the shim's logger */
    fmi2CallbackLogger master_logger;
    fmi2ComponentEnvironment master_environment;
    fmi2CallbackFreeMemory release;   /* frees this record, paired with what allocated it */
    char name[128];                   /* the instance name, for the shim's own messages */
    int debug_logging;                /* the master's loggingOn */
    unsigned categories;              /* bit k: CATEGORIES[k] asked for; 0: all */
} Instance;

/* pythonfmu's logger: errors always reach the master, the rest as its debug logging says. The message is passed
 * on exactly as pythonfmu passes it (as the format, without arguments). */
static void log_to_master(fmi2ComponentEnvironment environment, fmi2String name, fmi2Status status,
                          fmi2String category, fmi2String message, ...) {
    const Instance *self = environment;
    if (!self || !self->master_logger) return;
    if (passed_on(status == fmi2Error || status == fmi2Fatal, category, self->debug_logging, self->categories))
        self->master_logger(self->master_environment, name, status, category, message);
}

typedef fmi2Status (*get_integer_fn)(fmi2Component, const fmi2ValueReference[], size_t, fmi2Integer[]);

/* The call's status: the slave's own record of it when pythonfmu says fmi2OK. */
static fmi2Status checked(fmi2Component c, fmi2Status status) {
    if (status != fmi2OK || c == NULL) return status;
    get_integer_fn get = (get_integer_fn)real("fmi2GetInteger");
    const fmi2ValueReference vr = STATUS_VR;
    fmi2Integer recorded = fmi2OK;
    if (!get || get(c, &vr, 1, &recorded) != fmi2OK) return status;
    return (recorded == fmi2Warning || recorded == fmi2Error) ? (fmi2Status)recorded : status;
}

/* Forward the enclosing function ``name`` (whose own type is the inner one's) to pythonfmu's instance of ``c`` and
 * check its status. */
#define CALL(name, ...)                                              \
    __typeof__(&name) fn = (__typeof__(&name))real(#name);          \
    if (!fn || !c) return fmi2Error;                                 \
    fmi2Component inner = ((Instance *)c)->inner;                    \
    return checked(inner, fn(inner, ##__VA_ARGS__))

EXPORT const char *fmi2GetTypesPlatform(void) {
    const char *(*fn)(void) = (const char *(*)(void))real("fmi2GetTypesPlatform");
    return fn ? fn() : "default";
}

EXPORT const char *fmi2GetVersion(void) {
    const char *(*fn)(void) = (const char *(*)(void))real("fmi2GetVersion");
    return fn ? fn() : "2.0";
}

EXPORT fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                                     const fmi2CallbackFunctions *functions, fmi2Boolean visible,
                                     fmi2Boolean logging_on) {
    typedef fmi2Component (*fn_t)(fmi2String, fmi2Type, fmi2String, fmi2String, const fmi2CallbackFunctions *,
                                  fmi2Boolean, fmi2Boolean);
    fn_t fn = (fn_t)real("fmi2Instantiate");
    if (!fn || !functions) return NULL;
    int own = !functions->allocateMemory || !functions->freeMemory;
    Instance *self = own ? calloc(1, sizeof *self) : functions->allocateMemory(1, sizeof *self);
    if (!self) return NULL;
    memset(self, 0, sizeof *self);
    self->release = own ? free : functions->freeMemory;
    self->master_logger = functions->logger;
    self->master_environment = functions->componentEnvironment;
    self->debug_logging = logging_on != 0;
    snprintf(self->name, sizeof self->name, "%s", name ? name : "");
    self->to_inner = *functions;
    self->to_inner.logger = log_to_master;
    self->to_inner.componentEnvironment = self;
    self->to_inner.stepFinished = NULL;  /* pythonfmu never steps asynchronously */
    self->inner = fn(name, type, guid, resources, &self->to_inner, visible, 1);
    if (!self->inner) {
        self->release(self);
        return NULL;
    }
    return self;
}

EXPORT void fmi2FreeInstance(fmi2Component c) {
    void (*fn)(fmi2Component) = (void (*)(fmi2Component))real("fmi2FreeInstance");
    Instance *self = c;
    if (!self) return;
    if (fn) fn(self->inner);  /* it may still log through self */
    self->release(self);
}

/* The master's debug logging, kept by the shim (pythonfmu's stays on): categories must be the model description's. */
EXPORT fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String categories[]) {
    Instance *self = c;
    if (!self) return fmi2Error;
    unsigned asked = 0;
    for (size_t i = 0; i < n; i++) {
        int k = category_index(categories ? categories[i] : NULL);
        if (k < 0) {
            if (self->master_logger)
                self->master_logger(self->master_environment, self->name, fmi2Error, "logStatusError",
                                    "fmi2SetDebugLogging refused: a category is not one of the model description's "
                                    "(logStatusWarning, logStatusDiscard, logStatusError, logStatusFatal, logAll); "
                                    "nothing changed");
            return fmi2Error;
        }
        asked |= 1u << k;
    }
    self->debug_logging = on != 0;
    self->categories = asked;
    return fmi2OK;
}

EXPORT fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolerance_defined, fmi2Real tolerance,
                                      fmi2Real start, fmi2Boolean stop_defined, fmi2Real stop) {
    CALL(fmi2SetupExperiment, tolerance_defined, tolerance, start, stop_defined, stop);
}

/* Refuse ``function`` of component ``c``: one line (``function`` refused: ``why``) to the master's logger, fmi2Error.
 * ``why`` holds no '%': the logger takes it as its format. */
static fmi2Status refuse(fmi2Component c, const char *function, const char *why) {
    const Instance *self = c;
    char message[400];
    snprintf(message, sizeof message, "%s refused: %s. Nothing changed.", function, why);
    if (self && self->master_logger)
        self->master_logger(self->master_environment, self->name, fmi2Error, "logStatusError", message);
    return fmi2Error;
}

#define NO_ARGUMENTS(name) \
    EXPORT fmi2Status name(fmi2Component c) { CALL(name); }
NO_ARGUMENTS(fmi2EnterInitializationMode)
NO_ARGUMENTS(fmi2ExitInitializationMode)
NO_ARGUMENTS(fmi2Terminate)
NO_ARGUMENTS(fmi2Reset)
NO_ARGUMENTS(fmi2CancelStep)

/* (pythonfmu reads the arrays without looking: a NULL one would crash the master) */
#define GET_SET(name, value_type)                                                                            \
    EXPORT fmi2Status name(fmi2Component c, const fmi2ValueReference vr[], size_t n, value_type values[]) { \
        if (n > 0 && (!vr || !values)) return refuse(c, #name, "a NULL valueReferences or values array");   \
        CALL(name, vr, n, values);                                                                          \
    }
GET_SET(fmi2GetReal, fmi2Real)
GET_SET(fmi2GetInteger, fmi2Integer)
GET_SET(fmi2GetBoolean, fmi2Boolean)
GET_SET(fmi2GetString, fmi2String)
GET_SET(fmi2SetReal, const fmi2Real)
GET_SET(fmi2SetInteger, const fmi2Integer)
GET_SET(fmi2SetBoolean, const fmi2Boolean)
GET_SET(fmi2SetString, const fmi2String)

/* canGetAndSetFMUstate and canSerializeFMUstate are false: pythonfmu would answer fmi2OK (get) or fmi2Fatal. These
 * refuse whatever the arguments (which they leave alone, so the compiler is told not to mind them). */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define REFUSED(name, why, ...) \
    EXPORT fmi2Status name(fmi2Component c, __VA_ARGS__) { return refuse(c, #name, why); }
#define NO_FMU_STATE "this FMU cannot get or set its state (canGetAndSetFMUstate is false)"
#define NO_SERIALIZATION "this FMU cannot serialize its state (canSerializeFMUstate is false)"
REFUSED(fmi2GetFMUstate, NO_FMU_STATE, fmi2FMUstate *state)
REFUSED(fmi2SetFMUstate, NO_FMU_STATE, fmi2FMUstate state)
REFUSED(fmi2FreeFMUstate, NO_FMU_STATE, fmi2FMUstate *state)
REFUSED(fmi2SerializedFMUstateSize, NO_SERIALIZATION, fmi2FMUstate state, size_t *size)
REFUSED(fmi2SerializeFMUstate, NO_SERIALIZATION, fmi2FMUstate state, fmi2Byte bytes[], size_t size)
REFUSED(fmi2DeSerializeFMUstate, NO_SERIALIZATION, const fmi2Byte bytes[], size_t size, fmi2FMUstate *state)

EXPORT fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference unknown[], size_t n_unknown,
                                               const fmi2ValueReference known[], size_t n_known,
                                               const fmi2Real dv_known[], fmi2Real dv_unknown[]) {
    CALL(fmi2GetDirectionalDerivative, unknown, n_unknown, known, n_known, dv_known, dv_unknown);
}

EXPORT fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                              const fmi2Integer order[], const fmi2Real values[]) {
    CALL(fmi2SetRealInputDerivatives, vr, n, order, values);
}

EXPORT fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                               const fmi2Integer order[], fmi2Real values[]) {
    CALL(fmi2GetRealOutputDerivatives, vr, n, order, values);
}

EXPORT fmi2Status fmi2DoStep(fmi2Component c, fmi2Real time, fmi2Real step, fmi2Boolean no_set_state_before) {
    CALL(fmi2DoStep, time, step, no_set_state_before);
}

#define STATUS_OF(name, value_type)                                                           \
    EXPORT fmi2Status name(fmi2Component c, const fmi2StatusKind kind, value_type *value) { \
        CALL(name, kind, value);                                                           \
    }
STATUS_OF(fmi2GetStatus, fmi2Status)
STATUS_OF(fmi2GetRealStatus, fmi2Real)
STATUS_OF(fmi2GetIntegerStatus, fmi2Integer)
STATUS_OF(fmi2GetBooleanStatus, fmi2Boolean)
STATUS_OF(fmi2GetStringStatus, fmi2String)
