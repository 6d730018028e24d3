/*
 * A non-Python FMI 2.0 co-simulation master that runs TWO instances of one
 * OSMP sensor FMU side by side in one process and then leaves the way a C/C++
 * master (OpenMCx, …) does: fmi2Terminate and fmi2FreeInstance for both, then
 * `return` from main, so exit() runs every atexit handler, C++ static
 * destructor and library destructor (no _exit()). With "dlclose" as the last
 * argument it also unloads the FMU binary before returning.
 *
 * Build (the test does this):  cc -I<fmpy>/c-code osmp_two_instances.c -ldl -o osmp_two_instances
 * Usage: osmp_two_instances LIB.so RESOURCES_URI GUID IN.osi OUT_A.osi OUT_B.osi SENSOR_A SENSOR_B
 *          VR_IN_LO VR_IN_HI VR_IN_SIZE VR_OUT_LO VR_OUT_HI VR_OUT_SIZE VR_VALID VR_COUNT VR_SENSOR STEP_S
 *          [dlclose]
 * Prints one line per frame and instance: "frame K instance I valid V count N bytes B status S",
 * then "frames K worst_status S". Exit status 0 unless an FMI call failed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"

static void fmi_logger(fmi2ComponentEnvironment env, fmi2String instance, fmi2Status status,
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
    if (argc != 19 && argc != 20) {
        fprintf(stderr, "usage: see source\n");
        return 2;
    }
    int unload = argc == 20 && strcmp(argv[19], "dlclose") == 0;
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
        vr_in[i] = (fmi2ValueReference)atoi(argv[9 + i]);
        vr_out[i] = (fmi2ValueReference)atoi(argv[12 + i]);
    }
    vr_valid = (fmi2ValueReference)atoi(argv[15]);
    vr_count = (fmi2ValueReference)atoi(argv[16]);
    vr_sensor = (fmi2ValueReference)atoi(argv[17]);
    double step = atof(argv[18]);

    fmi2CallbackFunctions callbacks = {fmi_logger, calloc, free, NULL, NULL};
    const char *names[2] = {"lidar_a", "lidar_b"};
    fmi2Component c[2];
    FILE *out[2];
    for (int k = 0; k < 2; k++) {
        c[k] = fmi2Instantiate(names[k], fmi2CoSimulation, argv[3], argv[2], &callbacks, fmi2False, fmi2True);
        if (!c[k]) {
            fprintf(stderr, "fmi2Instantiate %s failed\n", names[k]);
            return 3;
        }
        fmi2String sensor = argv[7 + k];
        if (fmi2SetupExperiment(c[k], fmi2False, 0.0, 0.0, fmi2False, 0.0) > fmi2Warning ||
            fmi2EnterInitializationMode(c[k]) > fmi2Warning ||
            fmi2SetString(c[k], &vr_sensor, 1, &sensor) > fmi2Warning ||
            fmi2ExitInitializationMode(c[k]) > fmi2Warning) {
            fprintf(stderr, "initialization of %s failed\n", names[k]);
            return 3;
        }
        out[k] = fopen(argv[5 + k], "wb");
        if (!out[k]) {
            fprintf(stderr, "cannot open %s\n", argv[5 + k]);
            return 2;
        }
    }
    FILE *in = fopen(argv[4], "rb");
    if (!in) {
        fprintf(stderr, "cannot open %s\n", argv[4]);
        return 2;
    }
    uint32_t size;
    double t = 0.0;
    int frame = 0;
    fmi2Status worst = fmi2OK;
    while (fread(&size, 4, 1, in) == 1) {
        char *view = malloc(size);
        if (fread(view, 1, size, in) != size) {
            fprintf(stderr, "truncated trace\n");
            return 2;
        }
        uint64_t address = (uint64_t)(uintptr_t)view;
        fmi2Integer in_values[3] = {(fmi2Integer)(int32_t)(uint32_t)(address & 0xFFFFFFFFu),
                                    (fmi2Integer)(int32_t)(uint32_t)(address >> 32), (fmi2Integer)size};
        for (int k = 0; k < 2; k++) {
            fmi2Status status = fmi2SetInteger(c[k], vr_in, 3, in_values);
            fmi2Status step_status = fmi2DoStep(c[k], t, step, fmi2True);
            if (step_status > status) status = step_status;
            fmi2Integer out_values[3] = {0, 0, 0}, count = 0;
            fmi2Boolean valid = fmi2False;
            fmi2GetInteger(c[k], vr_out, 3, out_values);
            fmi2GetInteger(c[k], &vr_count, 1, &count);
            fmi2GetBoolean(c[k], &vr_valid, 1, &valid);
            uint64_t data_address = ((uint64_t)(uint32_t)out_values[1] << 32) | (uint32_t)out_values[0];
            uint32_t data_size = (uint32_t)out_values[2];
            fwrite(&data_size, 4, 1, out[k]);
            if (data_address && data_size) fwrite((const void *)(uintptr_t)data_address, 1, data_size, out[k]);
            printf("frame %d instance %d valid %d count %d bytes %u status %d\n", frame, k, (int)valid, (int)count,
                   data_size, (int)status);
            if (status > worst) worst = status;
        }
        free(view); /* the input only has to live until the end of fmi2DoStep */
        t += step;
        frame++;
    }
    fclose(in);
    for (int k = 0; k < 2; k++) {
        fclose(out[k]);
        fmi2Status status = fmi2Terminate(c[k]);
        if (status > worst) worst = status;
        fmi2FreeInstance(c[k]);
    }
    if (unload && dlclose(lib) != 0) {
        fprintf(stderr, "dlclose failed: %s\n", dlerror());
        return 5;
    }
    printf("frames %d worst_status %d\n", frame, (int)worst);
    /* a normal exit: atexit handlers, static destructors, library destructors */
    return worst > fmi2Warning ? 4 : 0;
}
