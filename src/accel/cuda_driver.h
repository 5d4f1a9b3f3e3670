/*
 * cuda_driver.h - the CUDA driver API as the CUDA backend uses it: loaded at
 * run time (dlopen of libcuda.so.1 + cuGetProcAddress), never linked.
 *
 * Types and constants come from the toolkit's <cuda.h> (present wherever a
 * CUDA build is made: the build needs nvcc for cuda_kernels.cu anyway); no
 * function declared there is called directly. The library must not link
 * libcuda or libcudart, so that one binary runs on machines without a
 * driver (the backend then reports itself off).
 *
 * MXA_CU_FUNCS lists every entry point: X(name, required, since) where
 * `since` is the CUDA version (1000*major + 10*minor) whose ABI we ask
 * cuGetProcAddress for (the stream memory operations: 12000, the "v2" API
 * that needs no kernel-module option). `name` appears three ways in the expansions:
 *   #name     the base symbol name for cuGetProcAddress ("cuStreamWriteValue64")
 *   f_##name  the table field
 *   name      macro-expanded by <cuda.h> to the versioned prototype
 *             (cuStreamWriteValue64 -> cuStreamWriteValue64_v2) whose type
 *             the field gets, and whose name is the dlsym() fallback.
 */
#ifndef MX_ACCEL_CUDA_DRIVER_H
#define MX_ACCEL_CUDA_DRIVER_H

#include <stddef.h>

#include <cuda.h>

#define MXA_CU_FUNCS(X)                                                                            \
    X(cuGetErrorName, 1, 6000)                                                                     \
    X(cuGetErrorString, 1, 6000)                                                                   \
    X(cuInit, 1, 2000)                                                                             \
    X(cuDriverGetVersion, 1, 2020)                                                                 \
    X(cuDeviceGetCount, 1, 2000)                                                                   \
    X(cuDeviceGet, 1, 2000)                                                                        \
    X(cuDeviceGetAttribute, 1, 2000)                                                               \
    X(cuDeviceGetName, 1, 2000)                                                                    \
    X(cuDeviceGetPCIBusId, 1, 4010)                                                                \
    X(cuDevicePrimaryCtxRetain, 1, 7000)                                                           \
    X(cuDevicePrimaryCtxRelease, 1, 11000)                                                         \
    X(cuCtxGetCurrent, 1, 4000)                                                                    \
    X(cuCtxSetCurrent, 1, 4000)                                                                    \
    X(cuCtxPushCurrent, 1, 4000)                                                                   \
    X(cuCtxPopCurrent, 1, 4000)                                                                    \
    X(cuCtxGetDevice, 1, 2000)                                                                     \
    X(cuStreamGetCtx, 1, 9020)                                                                     \
    X(cuStreamQuery, 1, 2000)                                                                      \
    X(cuStreamIsCapturing, 1, 10000)                                                               \
    X(cuStreamCreate, 1, 2000)                                                                     \
    X(cuStreamDestroy, 1, 4000)                                                                    \
    X(cuStreamSynchronize, 1, 2000)                                                                \
    X(cuMemHostAlloc, 1, 3020)                                                                     \
    X(cuMemFreeHost, 1, 2000)                                                                      \
    X(cuMemHostGetDevicePointer, 1, 3020)                                                          \
    X(cuModuleLoadData, 1, 2000)                                                                   \
    X(cuModuleUnload, 1, 2000)                                                                     \
    X(cuModuleGetFunction, 1, 2000)                                                                \
    X(cuLaunchKernel, 1, 4000)                                                                     \
    X(cuLaunchKernelEx, 0, 11060)                                                                  \
    X(cuPointerGetAttributes, 1, 7000)                                                             \
    X(cuStreamWriteValue64, 0, 12000)                                                              \
    X(cuStreamWaitValue64, 0, 12000)                                                               \
    X(cuStreamBatchMemOp, 0, 12000)                                                                \
    X(cuStreamGetId, 0, 12000)                                                                     \
    X(cuCtxGetId, 0, 12000)                                                                        \
    X(cuModuleGetLoadingMode, 0, 11070)                                                            \
    X(cuFuncLoad, 0, 12040)                                                                        \
    X(cuThreadExchangeStreamCaptureMode, 0, 10010)                                                 \
    X(cuCtxGetFlags, 0, 7000)                                                                      \
    X(cuCtxSetFlags, 0, 12010)                                                                     \
    X(cuIpcOpenMemHandle, 0, 11000)                                                                \
    X(cuIpcCloseMemHandle, 0, 4010)                                                                \
    X(cuIpcGetMemHandle, 0, 4010)                                                                  \
    X(cuMemAlloc, 0, 3020)                                                                         \
    X(cuMemFree, 0, 3020)                                                                          \
    X(cuMemsetD8Async, 0, 3020)                                                                    \
    X(cuMemHostRegister, 0, 6050)                                                                  \
    X(cuMemHostUnregister, 0, 4000)                                                                \
    X(cuMemCreate, 0, 10020)                                                                       \
    X(cuMemRelease, 0, 10020)                                                                      \
    X(cuMemAddressReserve, 0, 10020)                                                               \
    X(cuMemAddressFree, 0, 10020)                                                                  \
    X(cuMemMap, 0, 10020)                                                                          \
    X(cuMemUnmap, 0, 10020)                                                                        \
    X(cuMemSetAccess, 0, 10020)                                                                    \
    X(cuMemGetAllocationGranularity, 0, 10020)                                                     \
    X(cuMemExportToShareableHandle, 0, 10020)                                                      \
    X(cuMemImportFromShareableHandle, 0, 10020)                                                    \
    X(cuMemsetD8, 0, 3020)                                                                         \
    X(cuMemcpyDtoH, 0, 3020)                                                                       \
    X(cuMemcpyAsync, 0, 4000)                                                                      \
    X(cuPointerGetAttribute, 0, 4000)                                                              \
    X(cuMemcpyHtoDAsync, 0, 3020)                                                                  \
    X(cuDeviceCanAccessPeer, 0, 4000)                                                              \
    X(cuDeviceGetByPCIBusId, 0, 4010)                                                              \
    X(cuMemAllocManaged, 0, 6000)                                                                  \
    X(cuLaunchHostFunc, 0, 10000)                                                                  \
    X(cuEventCreate, 0, 2000)                                                                      \
    X(cuEventRecord, 0, 2000)                                                                      \
    X(cuEventQuery, 0, 2000)                                                                       \
    X(cuEventDestroy, 0, 4000)                                                                     \
    X(cuStreamGetCaptureInfo, 0, 12030)                                                            \
    X(cuUserObjectCreate, 0, 11030)                                                                \
    X(cuUserObjectRelease, 0, 11030)                                                               \
    X(cuGraphRetainUserObject, 0, 11030)

#define MXA_CU_FIELD_(name, req, since) __typeof__(&name) f_##name;
typedef struct {
    MXA_CU_FUNCS(MXA_CU_FIELD_)
} mxa_cu_api_t;
#undef MXA_CU_FIELD_

/* The loaded table (cuda.c). Valid while the backend is active. */
extern mxa_cu_api_t mxa_cu;

/* Call an entry point: MXA_CU(cuInit)(0). */
#define MXA_CU(name) (mxa_cu.f_##name)

/* The fatbinary of cuda_kernels.cu, embedded by the build
 * (src/accel/cuda_kernels.cu -> nvcc -fatbin -> C array). */
extern const unsigned char mxa_cuda_fatbin[];
extern const size_t mxa_cuda_fatbin_size;

/* Kernel names in the fatbinary (extern "C" in cuda_kernels.cu). */
#define MXA_CUDA_KERNEL_SET "mxa_flag_set_kernel"
#define MXA_CUDA_KERNEL_WAIT "mxa_flag_wait_kernel"
#define MXA_CUDA_KERNEL_WAIT_SET "mxa_flag_wait_set_kernel"
#define MXA_CUDA_KERNEL_SX_SEND "mxa_sx_send_kernel"
#define MXA_CUDA_KERNEL_SX_RECV "mxa_sx_recv_kernel"
#define MXA_CUDA_KERNEL_SX_RECV1 "mxa_sx_recv1_kernel"
#define MXA_CUDA_KERNEL_PART_RECV "mxa_part_recv_done_kernel"
#define MXA_CUDA_KERNEL_PART_SEND "mxa_part_send_done_kernel"
#define MXA_CUDA_KERNEL_PART_START "mxa_part_start_kernel"
#define MXA_CUDA_KERNEL_GRAPH_FIRE "mxa_graph_fire_kernel"
#define MXA_CUDA_KERNEL_GRAPH_WAIT "mxa_graph_wait_kernel"
#define MXA_CUDA_KERNEL_REDUCE "mxa_reduce_kernel"
#define MXA_CUDA_KERNEL_LLRED "mxa_llred_kernel"
#define MXA_CUDA_KERNEL_PACK "mxa_pack_kernel"

#endif
