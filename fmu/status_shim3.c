/*
 * lidar-fmu's FMI 3.0 status shim (Linux): the FMU's binary, in front of pythonfmu3's.
 *
 * Why: pythonfmu3 (0.3.4) gives a Python slave a status of its own in fmi3DoStep only: any other callback either
 * returns (fmi3OK) or raises (fmi3Fatal, which ends the co-simulation); and it has no Binary variables: its
 * fmi3GetBinary and fmi3SetBinary answer "not implemented". OSMP's FMI 3.0 packaging carries the SensorView and the
 * SensorData in Binary variables, and a master's misuse must be refused with fmi3Error and leave the instance
 * usable (FMI 3.0, section 2.2.2 and the state machine of section 4.2).
 *
 * How: every fmi3* call is forwarded to pythonfmu3's library, loaded from beside this one
 * (<this library's name without .so>.pythonfmu3.so); instances pass through unchanged, and so do the master's
 * logger and its debug logging (pythonfmu3 passes a slave's non-debug messages, its errors, always).
 * - Status: when pythonfmu3 answers fmi3OK, the shim reads the slave's Int32 variable with value reference 0
 *   (fmi3_status_of_last_call, registered first by fmu/LidarSensorFmi3.py), which holds the worst status the
 *   slave gave the call and is reset by that read, and returns it.
 * - Binary: fmi3GetBinary / fmi3SetBinary of value references vr[i] become fmi3GetUInt64 / fmi3SetUInt64 of
 *   vr[i] | BINARY_CHANNEL with two values per variable, the bytes' address and size. No variable has such a value
 *   reference; the slave (LidarSensorFmi3.py) takes them for its Binary variables: it copies what is set during
 *   the call and hands out buffers that stay valid past the FMU's next call, as FMI 3.0 (section 2.2.6.2) asks.
 * - pythonfmu3 implements co-simulation only here: fmi3InstantiateModelExchange and
 *   fmi3InstantiateScheduledExecution return NULL (pythonfmu3's own throws a C++ exception through C, which aborts).
 *
 * Our own code (MPL-2.0, like the rest of lidar-fmu), compiled against the FMI 3.0 headers pythonfmu3 ships
 * (fmi3Functions.h, 2-Clause BSD License, Modelica Association Project "FMI").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define STATUS_VR 0u
#define BINARY_CHANNEL 0x80000000u

#define INNER_SUFFIX ".pythonfmu3.so"
#include "status_shim_inner.h"

static const fmi3Byte empty_binary[1] = {0}; /* what an empty Binary points at: a valid address, size 0 */

/* The call's status: the slave's own record of it when pythonfmu3 says fmi3OK. */
static fmi3Status checked(fmi3Instance instance, fmi3Status status) {
    if (status != fmi3OK || instance == NULL) return status;
    fmi3GetInt32TYPE *get = (fmi3GetInt32TYPE *)real("fmi3GetInt32");
    const fmi3ValueReference vr = STATUS_VR;
    fmi3Int32 recorded = fmi3OK;
    if (!get || get(instance, &vr, 1, &recorded, 1) != fmi3OK) return status;
    return (recorded == fmi3Warning || recorded == fmi3Error) ? (fmi3Status)recorded : status;
}

/* Forward the enclosing function ``name`` to pythonfmu3's and check its status. */
#define CALL(name, ...)                                   \
    name##TYPE *fn = (name##TYPE *)real(#name);           \
    if (!fn || !instance) return fmi3Error;               \
    return checked(instance, fn(instance, ##__VA_ARGS__))

FMI3_Export const char *fmi3GetVersion(void) {
    fmi3GetVersionTYPE *fn = (fmi3GetVersionTYPE *)real("fmi3GetVersion");
    return fn ? fn() : fmi3Version;
}

FMI3_Export fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean on, size_t n,
                                           const fmi3String categories[]) {
    CALL(fmi3SetDebugLogging, on, n, categories);
}

FMI3_Export fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resources,
                                                     fmi3Boolean visible, fmi3Boolean logging_on,
                                                     fmi3Boolean event_mode_used, fmi3Boolean early_return_allowed,
                                                     const fmi3ValueReference required[], size_t n_required,
                                                     fmi3InstanceEnvironment environment,
                                                     fmi3LogMessageCallback log_message,
                                                     fmi3IntermediateUpdateCallback intermediate_update) {
    fmi3InstantiateCoSimulationTYPE *fn = (fmi3InstantiateCoSimulationTYPE *)real("fmi3InstantiateCoSimulation");
    if (!fn) return NULL;
    return fn(name, token, resources, visible, logging_on, event_mode_used, early_return_allowed, required,
              n_required, environment, log_message, intermediate_update);
}

FMI3_Export fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token, fmi3String resources,
                                                      fmi3Boolean visible, fmi3Boolean logging_on,
                                                      fmi3InstanceEnvironment environment,
                                                      fmi3LogMessageCallback log_message) {
    (void)token, (void)resources, (void)visible, (void)logging_on;
    if (log_message)
        log_message(environment, fmi3Error, "logStatusError",
                    "fmi3InstantiateModelExchange refused: this FMU is for co-simulation only");
    (void)name;
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
    if (log_message)
        log_message(environment, fmi3Error, "logStatusError",
                    "fmi3InstantiateScheduledExecution refused: this FMU is for co-simulation only");
    return NULL;
}

FMI3_Export void fmi3FreeInstance(fmi3Instance instance) {
    fmi3FreeInstanceTYPE *fn = (fmi3FreeInstanceTYPE *)real("fmi3FreeInstance");
    if (fn && instance) fn(instance);
}

FMI3_Export fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean tolerance_defined,
                                                   fmi3Float64 tolerance, fmi3Float64 start,
                                                   fmi3Boolean stop_defined, fmi3Float64 stop) {
    CALL(fmi3EnterInitializationMode, tolerance_defined, tolerance, start, stop_defined, stop);
}

#define NO_ARGUMENTS(name) \
    FMI3_Export fmi3Status name(fmi3Instance instance) { CALL(name); }
NO_ARGUMENTS(fmi3ExitInitializationMode)
NO_ARGUMENTS(fmi3EnterEventMode)
NO_ARGUMENTS(fmi3Terminate)
NO_ARGUMENTS(fmi3Reset)
NO_ARGUMENTS(fmi3EnterConfigurationMode)
NO_ARGUMENTS(fmi3ExitConfigurationMode)
NO_ARGUMENTS(fmi3EvaluateDiscreteStates)
NO_ARGUMENTS(fmi3EnterContinuousTimeMode)
NO_ARGUMENTS(fmi3EnterStepMode)

#define GET(name, value_type)                                                                            \
    FMI3_Export fmi3Status name(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,      \
                                value_type values[], size_t n_values) {                                 \
        CALL(name, vr, n_vr, values, n_values);                                                          \
    }
#define SET(name, value_type)                                                                            \
    FMI3_Export fmi3Status name(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,      \
                                const value_type values[], size_t n_values) {                           \
        CALL(name, vr, n_vr, values, n_values);                                                          \
    }
#define GET_SET(type) GET(fmi3Get##type, fmi3##type) SET(fmi3Set##type, fmi3##type)
GET_SET(Float32)
GET_SET(Float64)
GET_SET(Int8)
GET_SET(UInt8)
GET_SET(Int16)
GET_SET(UInt16)
GET_SET(Int32)
GET_SET(UInt32)
GET_SET(Int64)
GET_SET(UInt64)
GET_SET(Boolean)
GET_SET(String)

/* The value references of the Binary channel: each of ``vr`` with the top bit set (NULL: no memory). */
static fmi3ValueReference *channel(const fmi3ValueReference vr[], size_t n) {
    fmi3ValueReference *out = malloc((n ? n : 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++) out[i] = vr[i] | BINARY_CHANNEL;
    return out;
}

FMI3_Export fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                     size_t sizes[], fmi3Binary values[], size_t n_values) {
    fmi3GetUInt64TYPE *fn = (fmi3GetUInt64TYPE *)real("fmi3GetUInt64");
    if (!fn || !instance || n_values != n_vr) return fmi3Error; /* no arrays of binaries here */
    fmi3ValueReference *refs = channel(vr, n_vr);
    fmi3UInt64 *pairs = calloc(2 * n_vr + 1, sizeof *pairs);
    fmi3Status status = fmi3Error;
    if (refs && pairs) {
        status = checked(instance, fn(instance, refs, n_vr, pairs, 2 * n_vr));
        for (size_t i = 0; i < n_vr; i++) {
            uintptr_t address = (uintptr_t)pairs[2 * i];
            sizes[i] = address ? (size_t)pairs[2 * i + 1] : 0;
            values[i] = address ? (fmi3Binary)address : empty_binary;
        }
    }
    free(refs);
    free(pairs);
    return status;
}

FMI3_Export fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                     const size_t sizes[], const fmi3Binary values[], size_t n_values) {
    fmi3SetUInt64TYPE *fn = (fmi3SetUInt64TYPE *)real("fmi3SetUInt64");
    if (!fn || !instance || n_values != n_vr) return fmi3Error;
    fmi3ValueReference *refs = channel(vr, n_vr);
    fmi3UInt64 *pairs = calloc(2 * n_vr + 1, sizeof *pairs);
    fmi3Status status = fmi3Error;
    if (refs && pairs) {
        for (size_t i = 0; i < n_vr; i++) {
            pairs[2 * i] = (fmi3UInt64)(uintptr_t)values[i];
            pairs[2 * i + 1] = values[i] ? (fmi3UInt64)sizes[i] : 0;
        }
        status = checked(instance, fn(instance, refs, n_vr, pairs, 2 * n_vr));
    }
    free(refs);
    free(pairs);
    return status;
}

FMI3_Export fmi3Status fmi3GetClock(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                    fmi3Clock values[]) {
    CALL(fmi3GetClock, vr, n_vr, values);
}

FMI3_Export fmi3Status fmi3SetClock(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                    const fmi3Clock values[]) {
    CALL(fmi3SetClock, vr, n_vr, values);
}

FMI3_Export fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference vr,
                                                           size_t *n) {
    CALL(fmi3GetNumberOfVariableDependencies, vr, n);
}

FMI3_Export fmi3Status fmi3GetVariableDependencies(fmi3Instance instance, fmi3ValueReference dependent,
                                                   size_t element_of_dependent[], fmi3ValueReference independents[],
                                                   size_t element_of_independents[], fmi3DependencyKind kinds[],
                                                   size_t n) {
    CALL(fmi3GetVariableDependencies, dependent, element_of_dependent, independents, element_of_independents, kinds,
         n);
}

FMI3_Export fmi3Status fmi3GetFMUState(fmi3Instance instance, fmi3FMUState *state) {
    CALL(fmi3GetFMUState, state);
}

FMI3_Export fmi3Status fmi3SetFMUState(fmi3Instance instance, fmi3FMUState state) {
    CALL(fmi3SetFMUState, state);
}

FMI3_Export fmi3Status fmi3FreeFMUState(fmi3Instance instance, fmi3FMUState *state) {
    CALL(fmi3FreeFMUState, state);
}

FMI3_Export fmi3Status fmi3SerializedFMUStateSize(fmi3Instance instance, fmi3FMUState state, size_t *size) {
    CALL(fmi3SerializedFMUStateSize, state, size);
}

FMI3_Export fmi3Status fmi3SerializeFMUState(fmi3Instance instance, fmi3FMUState state, fmi3Byte bytes[],
                                             size_t size) {
    CALL(fmi3SerializeFMUState, state, bytes, size);
}

FMI3_Export fmi3Status fmi3DeserializeFMUState(fmi3Instance instance, const fmi3Byte bytes[], size_t size,
                                               fmi3FMUState *state) {
    CALL(fmi3DeserializeFMUState, bytes, size, state);
}

#define DERIVATIVE(name)                                                                                     \
    FMI3_Export fmi3Status name(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t n_unknowns, \
                                const fmi3ValueReference knowns[], size_t n_knowns, const fmi3Float64 seed[],  \
                                size_t n_seed, fmi3Float64 sensitivity[], size_t n_sensitivity) {             \
        CALL(name, unknowns, n_unknowns, knowns, n_knowns, seed, n_seed, sensitivity, n_sensitivity);        \
    }
DERIVATIVE(fmi3GetDirectionalDerivative)
DERIVATIVE(fmi3GetAdjointDerivative)

FMI3_Export fmi3Status fmi3GetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                              fmi3Float64 intervals[], fmi3IntervalQualifier qualifiers[]) {
    CALL(fmi3GetIntervalDecimal, vr, n_vr, intervals, qualifiers);
}

FMI3_Export fmi3Status fmi3GetIntervalFraction(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                               fmi3UInt64 counters[], fmi3UInt64 resolutions[],
                                               fmi3IntervalQualifier qualifiers[]) {
    CALL(fmi3GetIntervalFraction, vr, n_vr, counters, resolutions, qualifiers);
}

FMI3_Export fmi3Status fmi3GetShiftDecimal(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                           fmi3Float64 shifts[]) {
    CALL(fmi3GetShiftDecimal, vr, n_vr, shifts);
}

FMI3_Export fmi3Status fmi3GetShiftFraction(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                            fmi3UInt64 counters[], fmi3UInt64 resolutions[]) {
    CALL(fmi3GetShiftFraction, vr, n_vr, counters, resolutions);
}

FMI3_Export fmi3Status fmi3SetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                              const fmi3Float64 intervals[]) {
    CALL(fmi3SetIntervalDecimal, vr, n_vr, intervals);
}

FMI3_Export fmi3Status fmi3SetIntervalFraction(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                               const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    CALL(fmi3SetIntervalFraction, vr, n_vr, counters, resolutions);
}

FMI3_Export fmi3Status fmi3SetShiftDecimal(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                           const fmi3Float64 shifts[]) {
    CALL(fmi3SetShiftDecimal, vr, n_vr, shifts);
}

FMI3_Export fmi3Status fmi3SetShiftFraction(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                            const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    CALL(fmi3SetShiftFraction, vr, n_vr, counters, resolutions);
}

FMI3_Export fmi3Status fmi3UpdateDiscreteStates(fmi3Instance instance, fmi3Boolean *need_update,
                                                fmi3Boolean *terminate, fmi3Boolean *nominals_changed,
                                                fmi3Boolean *values_changed, fmi3Boolean *next_time_defined,
                                                fmi3Float64 *next_time) {
    CALL(fmi3UpdateDiscreteStates, need_update, terminate, nominals_changed, values_changed, next_time_defined,
         next_time);
}

FMI3_Export fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean no_set_state_before,
                                                   fmi3Boolean *enter_event_mode, fmi3Boolean *terminate) {
    CALL(fmi3CompletedIntegratorStep, no_set_state_before, enter_event_mode, terminate);
}

FMI3_Export fmi3Status fmi3SetTime(fmi3Instance instance, fmi3Float64 time) {
    CALL(fmi3SetTime, time);
}

#define FLOAT64_ARRAY(name, array_qualifier)                                                         \
    FMI3_Export fmi3Status name(fmi3Instance instance, array_qualifier fmi3Float64 values[], size_t n) { \
        CALL(name, values, n);                                                                       \
    }
FLOAT64_ARRAY(fmi3SetContinuousStates, const)
FLOAT64_ARRAY(fmi3GetContinuousStateDerivatives, )
FLOAT64_ARRAY(fmi3GetEventIndicators, )
FLOAT64_ARRAY(fmi3GetContinuousStates, )
FLOAT64_ARRAY(fmi3GetNominalsOfContinuousStates, )

FMI3_Export fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *n) {
    CALL(fmi3GetNumberOfEventIndicators, n);
}

FMI3_Export fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance instance, size_t *n) {
    CALL(fmi3GetNumberOfContinuousStates, n);
}

FMI3_Export fmi3Status fmi3GetOutputDerivatives(fmi3Instance instance, const fmi3ValueReference vr[], size_t n_vr,
                                                const fmi3Int32 orders[], fmi3Float64 values[], size_t n_values) {
    CALL(fmi3GetOutputDerivatives, vr, n_vr, orders, values, n_values);
}

FMI3_Export fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 time, fmi3Float64 step,
                                  fmi3Boolean no_set_state_before, fmi3Boolean *event_handling_needed,
                                  fmi3Boolean *terminate, fmi3Boolean *early_return, fmi3Float64 *last_successful) {
    CALL(fmi3DoStep, time, step, no_set_state_before, event_handling_needed, terminate, early_return,
         last_successful);
}

FMI3_Export fmi3Status fmi3ActivateModelPartition(fmi3Instance instance, fmi3ValueReference clock,
                                                  fmi3Float64 activation_time) {
    CALL(fmi3ActivateModelPartition, clock, activation_time);
}
