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
 * read, and returns it. Nothing else changes: arguments, instances and log
 * messages pass through as they are.
 *
 * Our own code (MPL-2.0, like the rest of lidar-fmu); FMI 2.0's types are
 * declared here as the standard defines them (fmi2TypesPlatform.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
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

#define EXPORT __attribute__((visibility("default")))
#define STATUS_VR 0u

static void *inner;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static void load_inner(void) {
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)&load_inner, &info) || !info.dli_fname) return;
    size_t n = strlen(info.dli_fname);
    if (n < 3 || n + 16 >= sizeof path || strcmp(info.dli_fname + n - 3, ".so") != 0) return;
    memcpy(path, info.dli_fname, n - 3);
    strcpy(path + n - 3, ".pythonfmu.so");
    inner = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!inner) fprintf(stderr, "lidar-fmu status shim: cannot load %s: %s\n", path, dlerror());
}

static void *real(const char *name) {
    pthread_once(&loaded, load_inner);
    return inner ? dlsym(inner, name) : NULL;
}

__attribute__((destructor)) static void unload_inner(void) {
    if (inner) dlclose(inner);  /* as the master unloading pythonfmu's library itself would */
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

/* Forward the enclosing function ``name`` (whose own type is the inner one's) and check its status. */
#define CALL(name, ...)                                              \
    __typeof__(&name) fn = (__typeof__(&name))real(#name);          \
    if (!fn) return fmi2Error;                                       \
    return checked(c, fn(c, ##__VA_ARGS__))

EXPORT const char *fmi2GetTypesPlatform(void) {
    const char *(*fn)(void) = (const char *(*)(void))real("fmi2GetTypesPlatform");
    return fn ? fn() : "default";
}

EXPORT const char *fmi2GetVersion(void) {
    const char *(*fn)(void) = (const char *(*)(void))real("fmi2GetVersion");
    return fn ? fn() : "2.0";
}

EXPORT fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                                     const void *functions, fmi2Boolean visible, fmi2Boolean logging_on) {
    typedef fmi2Component (*fn_t)(fmi2String, fmi2Type, fmi2String, fmi2String, const void *, fmi2Boolean,
                                  fmi2Boolean);
    fn_t fn = (fn_t)real("fmi2Instantiate");
    return fn ? fn(name, type, guid, resources, functions, visible, logging_on) : NULL;
}

EXPORT void fmi2FreeInstance(fmi2Component c) {
    void (*fn)(fmi2Component) = (void (*)(fmi2Component))real("fmi2FreeInstance");
    if (fn) fn(c);
}

EXPORT fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String categories[]) {
    CALL(fmi2SetDebugLogging, on, n, categories);
}

EXPORT fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolerance_defined, fmi2Real tolerance,
                                      fmi2Real start, fmi2Boolean stop_defined, fmi2Real stop) {
    CALL(fmi2SetupExperiment, tolerance_defined, tolerance, start, stop_defined, stop);
}

#define NO_ARGUMENTS(name) \
    EXPORT fmi2Status name(fmi2Component c) { CALL(name); }
NO_ARGUMENTS(fmi2EnterInitializationMode)
NO_ARGUMENTS(fmi2ExitInitializationMode)
NO_ARGUMENTS(fmi2Terminate)
NO_ARGUMENTS(fmi2Reset)
NO_ARGUMENTS(fmi2CancelStep)

#define GET_SET(name, value_type)                                                                            \
    EXPORT fmi2Status name(fmi2Component c, const fmi2ValueReference vr[], size_t n, value_type values[]) { \
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

EXPORT fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) {
    CALL(fmi2GetFMUstate, state);
}

EXPORT fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) {
    CALL(fmi2SetFMUstate, state);
}

EXPORT fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
    CALL(fmi2FreeFMUstate, state);
}

EXPORT fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    CALL(fmi2SerializedFMUstateSize, state, size);
}

EXPORT fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    CALL(fmi2SerializeFMUstate, state, bytes, size);
}

EXPORT fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                          fmi2FMUstate *state) {
    CALL(fmi2DeSerializeFMUstate, bytes, size, state);
}

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
