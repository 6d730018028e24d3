/*
 * A C master for the FMI 3.0 FMU that calls every function of fmi3Functions.h in every state it can reach
 * (Instantiated, Initialization Mode, Step Mode, Terminated), then misuses it (NULL arguments, wrong counts, the
 * Binary channel's value references, a NULL instance). A call that aborts or crashes the host ends this process:
 * the test asserts its exit status and checks each status it prints.
 *
 * Build (the test does this):  cc -I<pythonfmu3>/pythonfmu-export/src/fmi fmi3_every_call.c -ldl -o fmi3_every_call
 * Usage: fmi3_every_call LIB.so RESOURCES TOKEN SENSOR VR_TIME VR_MOUNTING_X VR_COUNT VR_VALID VR_SELF_HITS
 *          VR_SENSOR VR_VIEW_IN VR_DATA_OUT
 * Prints "call STATE FUNCTION STATUS | MESSAGE" per call (MESSAGE: the last line the FMU logged during it),
 * "misuse LABEL STATUS | MESSAGE" per misuse, "null FUNCTION STATUS" per call with a NULL instance.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

static void *lib;
static char logged[2048]; /* the last message the FMU logged during the current call */
static const char *const STATUS[] = {"OK", "Warning", "Discard", "Error", "Fatal"};

static void logger(fmi3InstanceEnvironment env, fmi3Status status, fmi3String category, fmi3String message) {
    (void)env, (void)category;
    snprintf(logged, sizeof logged, "%s: %s", STATUS[status <= fmi3Fatal ? status : fmi3Fatal], message);
    for (char *c = logged; *c; c++)
        if (*c == '\n') *c = ' ';
}

static void *symbol(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "missing symbol %s\n", name);
        exit(2);
    }
    return f;
}
#define F(name) ((name##TYPE *)symbol(#name))

static fmi3ValueReference vr_time, vr_mounting_x, vr_count, vr_valid, vr_self_hits, vr_sensor, vr_view_in,
    vr_data_out;
static const char *sensor;

static void report(const char *kind, const char *state, const char *function, fmi3Status status) {
    printf("%s %s %s %s | %s\n", kind, state, function, status <= fmi3Fatal ? STATUS[status] : "?", logged);
    fflush(stdout);
}

/* Every function that does not change the state, called once with sound arguments (the FMU's own variables). */
static void call_all(fmi3Instance c, const char *state, const char *kind) {
    fmi3Float64 f64[2] = {0}, seed[1] = {1.0};
    fmi3Float32 f32[1] = {0};
    fmi3Int8 i8[1] = {0};
    fmi3UInt8 u8[1] = {0};
    fmi3Int16 i16[1] = {0};
    fmi3UInt16 u16[1] = {0};
    fmi3Int32 i32[1] = {0}, orders[1] = {1};
    fmi3UInt32 u32[1] = {0};
    fmi3Int64 i64[1] = {0};
    fmi3UInt64 u64[2] = {0};
    fmi3Boolean b[1] = {fmi3True}, flags[6];
    fmi3String s[1] = {sensor};
    fmi3Binary bin[1] = {(const fmi3Byte *)""};
    size_t sizes[1] = {0}, n = 0, elements[1], elements2[1];
    fmi3Clock clocks[1] = {fmi3ClockInactive};
    fmi3IntervalQualifier qualifiers[1];
    fmi3ValueReference independents[1];
    fmi3DependencyKind kinds[1];
    fmi3FMUState fmu_state = NULL;
    fmi3Byte bytes[8] = {0};
    const fmi3String categories[1] = {"logStatusError"};
#define CALL(name, ...)                         \
    do {                                        \
        logged[0] = '\0';                       \
        fmi3Status st = F(name)(__VA_ARGS__);   \
        report(kind, state, #name, st);         \
    } while (0)
    CALL(fmi3SetDebugLogging, c, fmi3True, 1, categories);
    CALL(fmi3SetDebugLogging, c, fmi3False, 0, NULL);
    CALL(fmi3GetFloat64, c, &vr_time, 1, f64, 1);
    CALL(fmi3SetFloat64, c, &vr_mounting_x, 1, f64, 1);
    CALL(fmi3GetInt32, c, &vr_count, 1, i32, 1);
    CALL(fmi3SetInt32, c, &vr_count, 1, i32, 1);
    CALL(fmi3GetInt64, c, &vr_time, 1, i64, 1);
    CALL(fmi3SetInt64, c, &vr_time, 1, i64, 1);
    CALL(fmi3GetUInt64, c, &vr_time, 1, u64, 1);
    CALL(fmi3SetUInt64, c, &vr_time, 1, u64, 1);
    CALL(fmi3GetBoolean, c, &vr_valid, 1, b, 1);
    b[0] = fmi3True;
    CALL(fmi3SetBoolean, c, &vr_self_hits, 1, b, 1);
    CALL(fmi3GetString, c, &vr_sensor, 1, s, 1);
    s[0] = sensor;
    CALL(fmi3SetString, c, &vr_sensor, 1, s, 1);
    CALL(fmi3GetBinary, c, &vr_data_out, 1, sizes, bin, 1);
    bin[0] = (const fmi3Byte *)"";
    sizes[0] = 0;
    CALL(fmi3SetBinary, c, &vr_view_in, 1, sizes, bin, 1);
    CALL(fmi3GetFloat32, c, &vr_time, 1, f32, 1);
    CALL(fmi3SetFloat32, c, &vr_time, 1, f32, 1);
    CALL(fmi3GetInt8, c, &vr_time, 1, i8, 1);
    CALL(fmi3SetInt8, c, &vr_time, 1, i8, 1);
    CALL(fmi3GetUInt8, c, &vr_time, 1, u8, 1);
    CALL(fmi3SetUInt8, c, &vr_time, 1, u8, 1);
    CALL(fmi3GetInt16, c, &vr_time, 1, i16, 1);
    CALL(fmi3SetInt16, c, &vr_time, 1, i16, 1);
    CALL(fmi3GetUInt16, c, &vr_time, 1, u16, 1);
    CALL(fmi3SetUInt16, c, &vr_time, 1, u16, 1);
    CALL(fmi3GetUInt32, c, &vr_time, 1, u32, 1);
    CALL(fmi3SetUInt32, c, &vr_time, 1, u32, 1);
    CALL(fmi3GetClock, c, &vr_time, 1, clocks);
    CALL(fmi3SetClock, c, &vr_time, 1, clocks);
    CALL(fmi3GetIntervalDecimal, c, &vr_time, 1, f64, qualifiers);
    CALL(fmi3GetIntervalFraction, c, &vr_time, 1, u64, u64 + 1, qualifiers);
    CALL(fmi3GetShiftDecimal, c, &vr_time, 1, f64);
    CALL(fmi3GetShiftFraction, c, &vr_time, 1, u64, u64 + 1);
    CALL(fmi3SetIntervalDecimal, c, &vr_time, 1, f64);
    CALL(fmi3SetIntervalFraction, c, &vr_time, 1, u64, u64 + 1);
    CALL(fmi3SetShiftDecimal, c, &vr_time, 1, f64);
    CALL(fmi3SetShiftFraction, c, &vr_time, 1, u64, u64 + 1);
    CALL(fmi3ActivateModelPartition, c, vr_time, 0.0);
    CALL(fmi3GetNumberOfVariableDependencies, c, vr_data_out, &n);
    CALL(fmi3GetVariableDependencies, c, vr_data_out, elements, independents, elements2, kinds, 1);
    CALL(fmi3GetDirectionalDerivative, c, &vr_time, 1, &vr_mounting_x, 1, seed, 1, f64, 1);
    CALL(fmi3GetAdjointDerivative, c, &vr_time, 1, &vr_mounting_x, 1, seed, 1, f64, 1);
    CALL(fmi3GetOutputDerivatives, c, &vr_time, 1, orders, f64, 1);
    CALL(fmi3GetFMUState, c, &fmu_state);
    CALL(fmi3SetFMUState, c, fmu_state);
    CALL(fmi3FreeFMUState, c, &fmu_state);
    CALL(fmi3SerializedFMUStateSize, c, fmu_state, &n);
    CALL(fmi3SerializeFMUState, c, fmu_state, bytes, sizeof bytes);
    CALL(fmi3DeserializeFMUState, c, bytes, sizeof bytes, &fmu_state);
    CALL(fmi3EnterEventMode, c);
    CALL(fmi3EnterStepMode, c);
    CALL(fmi3EnterConfigurationMode, c);
    CALL(fmi3ExitConfigurationMode, c);
    CALL(fmi3EvaluateDiscreteStates, c);
    CALL(fmi3UpdateDiscreteStates, c, flags, flags + 1, flags + 2, flags + 3, flags + 4, f64);
    CALL(fmi3EnterContinuousTimeMode, c);
    CALL(fmi3CompletedIntegratorStep, c, fmi3True, flags, flags + 1);
    CALL(fmi3SetTime, c, 0.0);
    CALL(fmi3SetContinuousStates, c, f64, 1);
    CALL(fmi3GetContinuousStateDerivatives, c, f64, 1);
    CALL(fmi3GetEventIndicators, c, f64, 1);
    CALL(fmi3GetContinuousStates, c, f64, 1);
    CALL(fmi3GetNominalsOfContinuousStates, c, f64, 1);
    CALL(fmi3GetNumberOfEventIndicators, c, &n);
    CALL(fmi3GetNumberOfContinuousStates, c, &n);
}

static fmi3Boolean flags[4];
static fmi3Float64 last;
#define ENTER(c) F(fmi3EnterInitializationMode)(c, fmi3False, 0.0, 0.0, fmi3False, 0.0)

/* The calls that change the state, in ``state`` (each refused leaves it as it was; see main for the others). */
static void refused_transitions(fmi3Instance c, const char *kind, const char *state, int enter, int exit_, int step,
                                int terminate) {
    if (enter) CALL(fmi3EnterInitializationMode, c, fmi3False, 0.0, 0.0, fmi3False, 0.0);
    if (exit_) CALL(fmi3ExitInitializationMode, c);
    if (step) CALL(fmi3DoStep, c, 0.0, 0.1, fmi3True, flags, flags + 1, flags + 2, &last);
    if (terminate) CALL(fmi3Terminate, c);
}

/* Initialize ``c`` from Instantiated with the small sensor: whether it reached Step Mode. */
static int initialized(fmi3Instance c) {
    return ENTER(c) == fmi3OK && F(fmi3SetString)(c, &vr_sensor, 1, &sensor, 1) == fmi3OK &&
           F(fmi3ExitInitializationMode)(c) <= fmi3Warning;
}

static void misuse(fmi3Instance c) {
    const char *kind = "misuse", *state = "Step Mode";
    fmi3ValueReference channel_in = vr_view_in | 0x80000000u, channel_out = vr_data_out | 0x80000000u;
    fmi3ValueReference two[2] = {vr_view_in, vr_view_in};
    fmi3UInt64 pair[2] = {(fmi3UInt64)(uintptr_t)"x", 1};
    fmi3Float64 f64[2];
    fmi3String null_string[1] = {NULL};
    fmi3Binary bin[2] = {(const fmi3Byte *)"", (const fmi3Byte *)""};
    size_t sizes[2] = {0, 0}, n;
    const fmi3String nonsense[1] = {"logNonsense"}, null_category[1] = {NULL};
    CALL(fmi3SetUInt64, c, &channel_in, 1, pair, 2);                  /* once a segfault */
    CALL(fmi3SetUInt64, c, &channel_in, 1, pair, 1);
    CALL(fmi3GetUInt64, c, &channel_out, 1, pair, 1);                 /* once fmi3OK */
    CALL(fmi3GetBinary, c, &channel_out, 1, sizes, bin, 1);
    CALL(fmi3SetBinary, c, two, 2, sizes, bin, 1);                    /* nValues != nvr */
    CALL(fmi3GetFloat64, c, NULL, 1, f64, 1);
    CALL(fmi3GetFloat64, c, &vr_time, 1, NULL, 1);
    CALL(fmi3GetFloat64, c, &vr_time, 1, f64, 2);
    CALL(fmi3SetString, c, &vr_sensor, 1, null_string, 1);
    CALL(fmi3SetFMUState, c, NULL);
    CALL(fmi3GetFMUState, c, NULL);
    CALL(fmi3SerializedFMUStateSize, c, NULL, &n);
    CALL(fmi3SetDebugLogging, c, fmi3True, 1, nonsense);
    CALL(fmi3SetDebugLogging, c, fmi3True, 1, NULL);
    CALL(fmi3SetDebugLogging, c, fmi3True, 1, null_category);
    CALL(fmi3DoStep, c, 0.1, 0.0, fmi3True, flags, flags + 1, flags + 2, &last); /* a step of 0 */
    CALL(fmi3DoStep, c, 0.1, 0.1, fmi3True, NULL, NULL, NULL, NULL);             /* FMI 3.0: non-NULL; OK here */
}

int main(int argc, char **argv) {
    if (argc != 13) {
        fprintf(stderr, "usage: see source\n");
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 2;
    }
    const char *resources = argv[2], *token = argv[3];
    sensor = argv[4];
    fmi3ValueReference *vrs[] = {&vr_time, &vr_mounting_x, &vr_count, &vr_valid, &vr_self_hits, &vr_sensor,
                                 &vr_view_in, &vr_data_out};
    for (int k = 0; k < 8; k++) *vrs[k] = (fmi3ValueReference)strtoul(argv[5 + k], NULL, 10);
    printf("version %s\n", F(fmi3GetVersion)());

    const char *kind = "misuse", *state = "none";
    fmi3Instance refused[3];
    logged[0] = '\0';
    refused[0] = F(fmi3InstantiateCoSimulation)("e", token, resources, fmi3False, fmi3False, fmi3True, fmi3False,
                                                NULL, 0, NULL, logger, NULL);
    report(kind, state, "fmi3InstantiateCoSimulation(eventModeUsed)", refused[0] ? fmi3OK : fmi3Error);
    logged[0] = '\0';
    refused[1] = F(fmi3InstantiateModelExchange)("m", token, resources, fmi3False, fmi3False, NULL, logger);
    report(kind, state, "fmi3InstantiateModelExchange", refused[1] ? fmi3OK : fmi3Error);
    logged[0] = '\0';
    refused[2] = F(fmi3InstantiateScheduledExecution)("s", token, resources, fmi3False, fmi3False, NULL, logger, NULL,
                                                      NULL, NULL);
    report(kind, state, "fmi3InstantiateScheduledExecution", refused[2] ? fmi3OK : fmi3Error);
    call_all(NULL, "none", "null");
    refused_transitions(NULL, "null", "none", 1, 1, 1, 1);
    F(fmi3FreeInstance)(NULL);

    fmi3Instance c = F(fmi3InstantiateCoSimulation)("every_call", token, resources, fmi3False, fmi3False, fmi3False,
                                                    fmi3False, NULL, 0, NULL, logger, NULL);
    if (!c) {
        fprintf(stderr, "fmi3InstantiateCoSimulation failed: %s\n", logged);
        return 3;
    }
    kind = "call";
    state = "Instantiated";
    call_all(c, state, kind);
    refused_transitions(c, kind, state, 0, 1, 1, 1);
    CALL(fmi3Reset, c);
    CALL(fmi3EnterInitializationMode, c, fmi3False, 0.0, 0.0, fmi3False, 0.0);

    state = "Initialization Mode";
    call_all(c, state, kind);
    refused_transitions(c, kind, state, 1, 0, 1, 1);
    CALL(fmi3Reset, c);
    if (ENTER(c) != fmi3OK || F(fmi3SetString)(c, &vr_sensor, 1, &sensor, 1) != fmi3OK) return 3;
    CALL(fmi3ExitInitializationMode, c);

    state = "Step Mode";
    call_all(c, state, kind);
    refused_transitions(c, kind, state, 1, 1, 0, 0);
    CALL(fmi3DoStep, c, 0.0, 0.1, fmi3True, flags, flags + 1, flags + 2, &last);
    misuse(c);
    kind = "call";
    CALL(fmi3Terminate, c);

    state = "Terminated";
    call_all(c, state, kind);
    refused_transitions(c, kind, state, 1, 1, 1, 1);
    CALL(fmi3Reset, c);
    /* Reset from Step Mode; then usable again: a step after a fresh initialization */
    if (!initialized(c)) return 3;
    state = "Step Mode";
    CALL(fmi3Reset, c);
    if (!initialized(c)) return 3;
    state = "after Reset";
    CALL(fmi3DoStep, c, 0.0, 0.1, fmi3True, flags, flags + 1, flags + 2, &last);
    F(fmi3FreeInstance)(c); /* in Step Mode */
    printf("done\n");
    return 0;
}
