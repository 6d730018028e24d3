/*
 * A minimal non-Python FMI 2.0 co-simulation master for OSMP sensor FMUs, the
 * way OpenMCx and other C/C++ masters drive them: dlopen the FMU binary, pass
 * each SensorView of a .osi trace by pointer (base.lo/base.hi/size) and copy
 * the SensorData the FMU points at into an output .osi trace.
 *
 * Build (the test does this):  cc -I<fmpy>/c-code osmp_host.c -ldl -o osmp_host
 * Usage: osmp_host LIB.so RESOURCES_URI GUID IN.osi OUT.osi SENSOR
 *          VR_IN_LO VR_IN_HI VR_IN_SIZE VR_OUT_LO VR_OUT_HI VR_OUT_SIZE VR_VALID VR_COUNT VR_SENSOR STEP_S
 * Prints one line per frame: "frame K valid V count N bytes B status S".
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"

static void logger(fmi2ComponentEnvironment env, fmi2String instance, fmi2Status status,
                   fmi2String category, fmi2String message, ...) {
    (void)env;
    (void)category;
    fprintf(stderr, "[%s status=%d] %s\n", instance, (int)status, message);
}

#define LOAD(name)                                                            \
    name##TYPE *name = (name##TYPE *)dlsym(lib, #name);                        \
    if (!name) {                                                              \
        fprintf(stderr, "missing symbol %s\n", #name);                        \
        return 2;                                                             \
    }

int main(int argc, char **argv) {
    if (argc != 17) {
        fprintf(stderr, "usage: see source\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 2;
    }
    LOAD(fmi2Instantiate) LOAD(fmi2SetupExperiment) LOAD(fmi2EnterInitializationMode)
    LOAD(fmi2ExitInitializationMode) LOAD(fmi2SetString) LOAD(fmi2SetInteger) LOAD(fmi2GetInteger)
    LOAD(fmi2GetBoolean) LOAD(fmi2DoStep) LOAD(fmi2Terminate) LOAD(fmi2FreeInstance)

    fmi2ValueReference vr_in[3], vr_out[3], vr_valid, vr_count, vr_sensor;
    for (int i = 0; i < 3; i++) {
        vr_in[i] = (fmi2ValueReference)atoi(argv[7 + i]);
        vr_out[i] = (fmi2ValueReference)atoi(argv[10 + i]);
    }
    vr_valid = (fmi2ValueReference)atoi(argv[13]);
    vr_count = (fmi2ValueReference)atoi(argv[14]);
    vr_sensor = (fmi2ValueReference)atoi(argv[15]);
    double step = atof(argv[16]);

    fmi2CallbackFunctions callbacks = {logger, calloc, free, NULL, NULL};
    fmi2Component c = fmi2Instantiate("c_host", fmi2CoSimulation, argv[3], argv[2], &callbacks, fmi2False, fmi2True);
    if (!c) {
        fprintf(stderr, "fmi2Instantiate failed\n");
        return 3;
    }
    fmi2String sensor = argv[6];
    if (fmi2SetupExperiment(c, fmi2False, 0.0, 0.0, fmi2False, 0.0) > fmi2Warning ||
        fmi2EnterInitializationMode(c) > fmi2Warning || fmi2SetString(c, &vr_sensor, 1, &sensor) > fmi2Warning ||
        fmi2ExitInitializationMode(c) > fmi2Warning) {
        fprintf(stderr, "initialization failed\n");
        return 3;
    }
    FILE *in = fopen(argv[4], "rb");
    FILE *out = fopen(argv[5], "wb");
    if (!in || !out) {
        fprintf(stderr, "cannot open traces\n");
        return 2;
    }
    uint32_t size;
    double t = 0.0;
    int frame = 0, worst = fmi2OK;
    while (fread(&size, 4, 1, in) == 1) {
        char *view = malloc(size);
        if (fread(view, 1, size, in) != size) {
            fprintf(stderr, "truncated trace\n");
            return 2;
        }
        uint64_t address = (uint64_t)(uintptr_t)view;
        fmi2Integer in_values[3] = {(fmi2Integer)(int32_t)(uint32_t)(address & 0xFFFFFFFFu),
                                    (fmi2Integer)(int32_t)(uint32_t)(address >> 32), (fmi2Integer)size};
        fmi2Status status = fmi2SetInteger(c, vr_in, 3, in_values);
        fmi2Status step_status = fmi2DoStep(c, t, step, fmi2True);
        if (step_status > status) status = step_status;
        free(view); /* the input only has to live until the end of fmi2DoStep */
        fmi2Integer out_values[3] = {0, 0, 0}, count = 0;
        fmi2Boolean valid = fmi2False;
        fmi2GetInteger(c, vr_out, 3, out_values);
        fmi2GetInteger(c, &vr_count, 1, &count);
        fmi2GetBoolean(c, &vr_valid, 1, &valid);
        uint64_t data_address = ((uint64_t)(uint32_t)out_values[1] << 32) | (uint32_t)out_values[0];
        uint32_t data_size = (uint32_t)out_values[2];
        fwrite(&data_size, 4, 1, out);
        if (data_address && data_size) fwrite((const void *)(uintptr_t)data_address, 1, data_size, out);
        printf("frame %d valid %d count %d bytes %u status %d\n", frame, (int)valid, (int)count, data_size, (int)status);
        if (status > worst) worst = status;
        t += step;
        frame++;
    }
    fclose(in);
    fclose(out);
    fmi2Terminate(c);
    fmi2FreeInstance(c);
    printf("frames %d worst_status %d\n", frame, worst);
    /* a normal exit: atexit handlers, static destructors, library destructors
     * (pythonfmu 0.7.0's binary corrupted the heap there until the slave got
     * its exit handler: docs/fmu.md, "Non-Python masters on Linux") */
    return worst > fmi2Warning ? 4 : 0;
}
