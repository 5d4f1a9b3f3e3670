/*
 * ex_enqueue.h - MPICH's own stream enqueue API (MPICH >= 4.1 built with
 * CUDA): a stream communicator for a cudaStream_t, for the examples' and
 * benchmarks' "mpich-enqueue" variants. Header-only, C; include once per
 * program.
 *
 *   MPIX_Stream_create (info "type" = "cudaStream_t", "value" = the stream
 *   as hex), MPIX_Stream_comm_create; then MPIX_Send_enqueue,
 *   MPIX_Recv_enqueue, MPIX_Isend_enqueue, MPIX_Irecv_enqueue,
 *   MPIX_Wait_enqueue, MPIX_Waitall_enqueue on that communicator.
 *
 * MPICH needs a reserved VCI for each stream: run with
 * MPIR_CVAR_CH4_RESERVE_VCIS=1 (or more); without it MPIX_Stream_create
 * fails and the variant is skipped with MPICH's error message.
 */
#ifndef EX_ENQUEUE_H
#define EX_ENQUEUE_H

#include "ex_util.h"

#if defined(EX_HAVE_CUDA) && defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40100000
#define EX_HAVE_MPICH_ENQUEUE 1
#endif

#ifdef EX_HAVE_MPICH_ENQUEUE
static MPIX_Stream ex_enq_stream = MPIX_STREAM_NULL;
#endif

/* Collective over MPI_COMM_WORLD. Makes *scomm, a stream communicator over
 * MPI_COMM_WORLD bound to the cudaStream_t `cudastream`. Returns 1 when
 * usable on every rank; else 0, *scomm = MPI_COMM_NULL and why says why. */
static EX_UNUSED int ex_enqueue_setup(int is_device, void *cudastream, MPI_Comm *scomm, char *why,
                                      size_t whylen)
{
    *scomm = MPI_COMM_NULL;
    why[0] = 0;
#ifdef EX_HAVE_MPICH_ENQUEUE
    int ok = is_device, all = 0, rc = MPI_SUCCESS;
    if (!ok)
        snprintf(why, whylen, "needs the CUDA backend");
    if (ok && ex_mpi_cuda_support() != 1) {
        snprintf(why, whylen,
                 "MPICH %s reports no CUDA support (built without CUDA, or "
                 "MPIR_CVAR_ENABLE_GPU=0)",
                 MPICH_VERSION);
        ok = 0;
    }
    if (ok) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "type", "cudaStream_t");
        MPIX_Info_set_hex(info, "value", &cudastream, (int)sizeof cudastream);
        /* errors not tied to a communicator go to MPI_COMM_SELF (MPI-4) or
         * MPI_COMM_WORLD: return them for this call, then restore */
        MPI_Errhandler eh_world, eh_self;
        MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh_world);
        MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh_self);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        rc = MPIX_Stream_create(info, &ex_enq_stream);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh_world);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, eh_self);
        MPI_Errhandler_free(&eh_world);
        MPI_Errhandler_free(&eh_self);
        MPI_Info_free(&info);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int l = 0;
            MPI_Error_string(rc, s, &l);
            snprintf(why, whylen,
                     "MPIX_Stream_create failed: %s (set "
                     "MPIR_CVAR_CH4_RESERVE_VCIS=1?)",
                     s);
            ok = 0;
            ex_enq_stream = MPIX_STREAM_NULL;
        }
    }
    EX_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (all) {
        MPI_Errhandler eh_world;
        MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh_world);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = MPIX_Stream_comm_create(MPI_COMM_WORLD, ex_enq_stream, scomm);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh_world);
        MPI_Errhandler_free(&eh_world);
        ok = rc == MPI_SUCCESS;
        if (!ok) {
            char s[MPI_MAX_ERROR_STRING];
            int l = 0;
            MPI_Error_string(rc, s, &l);
            snprintf(why, whylen, "MPIX_Stream_comm_create failed: %s", s);
            *scomm = MPI_COMM_NULL;
        }
        EX_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    }
    if (!all) {
        if (ok && !why[0])
            snprintf(why, whylen, "MPICH stream enqueue not usable on every rank");
        if (*scomm != MPI_COMM_NULL)
            MPI_Comm_free(scomm);
        if (ex_enq_stream != MPIX_STREAM_NULL)
            MPIX_Stream_free(&ex_enq_stream);
        return 0;
    }
    MPI_Comm_set_errhandler(*scomm, MPI_ERRORS_RETURN);
    return 1;
#else
    (void)is_device, (void)cudastream;
#if defined(MPICH_VERSION)
    snprintf(why, whylen,
             "needs MPICH >= 4.1 built with CUDA, and a CUDA build (this is "
             "MPICH %s)",
             MPICH_VERSION);
#else
    snprintf(why, whylen, "needs MPICH >= 4.1 built with CUDA (this MPI is not MPICH)");
#endif
    return 0;
#endif
}

static EX_UNUSED void ex_enqueue_teardown(MPI_Comm *scomm)
{
#ifdef EX_HAVE_MPICH_ENQUEUE
    if (*scomm != MPI_COMM_NULL)
        EX_MPI(MPI_Comm_free(scomm));
    if (ex_enq_stream != MPIX_STREAM_NULL)
        EX_MPI(MPIX_Stream_free(&ex_enq_stream));
#else
    (void)scomm;
#endif
}

#endif
