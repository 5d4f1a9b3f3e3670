/*
 * probes.c - probes on a stream communicator (host streams), issue 20
 * item 5: stream-ordered messages are matched by the library, not by the
 * MPI library, so its probes never see them.
 *
 *   1. MPI_Probe and MPI_Mprobe on a stream communicator fail with
 *      MPI_ERR_UNSUPPORTED_OPERATION (they could only wait forever), even
 *      with a stream-ordered message waiting; MPI_PROC_NULL passes through
 *      and answers at once, as MPI defines;
 *   2. MPI_Iprobe / MPI_Improbe pass through: no message found although a
 *      stream-ordered one has arrived (it is then received normally), and
 *      the library logs one warning per communicator and call, not per call
 *      (counted in this rank's own log file, MPIX_ACC_LOG_FILE);
 *   3. on a plain communicator every probe is the MPI library's: a message
 *      is found by MPI_Probe, MPI_Iprobe, MPI_Mprobe + MPI_Mrecv.
 */
#include "common.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int next, prev;
static MPIX_Acc_stream S;
static char logpath[256];

static int class_of(int rc)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* Every rank sends one stream-ordered message to next (tag 4) and, once it
 * has surely arrived, tries the probes; then receives it. */
static void stream_comm_probes(MPI_Comm c)
{
    t_phase("1. blocking probes refused on a stream communicator");
    uint64_t out = 7000u + (uint64_t)t_rank, in = 0;
    MPI_Request sr;
    T_MPI(MPI_Isend(&out, 1, MPI_UINT64_T, next, 4, c, &sr));
    T_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE)); /* stream-ordered: returns at once */
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every message sent */
    usleep(20000);

    MPI_Status st;
    int rc = MPI_Probe(prev, 4, c, &st);
    T_CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION,
            "MPI_Probe on a stream communicator: error class %d, expected %d", class_of(rc),
            MPI_ERR_UNSUPPORTED_OPERATION);
    MPI_Message m = MPI_MESSAGE_NULL;
    rc = MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &m, &st);
    T_CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION,
            "MPI_Mprobe on a stream communicator: error class %d, expected %d", class_of(rc),
            MPI_ERR_UNSUPPORTED_OPERATION);
    /* MPI_PROC_NULL: MPI answers at once with source MPI_PROC_NULL */
    memset(&st, 0, sizeof st);
    T_MPI(MPI_Probe(MPI_PROC_NULL, 4, c, &st));
    T_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG,
            "MPI_Probe(MPI_PROC_NULL): source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);

    t_phase("2. nonblocking probes pass through, warned once");
    for (int i = 0; i < 5; i++) {
        int flag = -1;
        T_MPI(MPI_Iprobe(prev, 4, c, &flag, &st));
        T_CHECK(flag == 0, "MPI_Iprobe %d found a stream-ordered message (flag %d)", i, flag);
        flag = -1;
        m = MPI_MESSAGE_NULL;
        T_MPI(MPI_Improbe(MPI_ANY_SOURCE, 4, c, &flag, &m, &st));
        T_CHECK(flag == 0 && m == MPI_MESSAGE_NULL, "MPI_Improbe %d: flag %d", i, flag);
    }
    /* the message is there all along: a receive takes it */
    MPI_Request rr;
    T_MPI(MPI_Irecv(&in, 1, MPI_UINT64_T, prev, 4, c, &rr));
    T_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(in == 7000u + (uint64_t)prev, "received %llu, expected %llu", (unsigned long long)in,
            (unsigned long long)(7000u + (uint64_t)prev));

    /* one warning per communicator and call kind */
    FILE *f = fopen(logpath, "r");
    T_CHECK(f != NULL, "no log file %s (the warnings went elsewhere)", logpath);
    char line[1024];
    int ni = 0, nim = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "MPI_Iprobe on a stream communicator"))
            ni++;
        if (strstr(line, "MPI_Improbe on a stream communicator"))
            nim++;
    }
    if (f)
        fclose(f);
    /* the flag is per communicator: the first nonblocking probe warns */
    T_CHECK(ni + nim == 1, "warnings: %d for MPI_Iprobe, %d for MPI_Improbe; expected one in all",
            ni, nim);
}

static void plain_comm_probes(void)
{
    t_phase("3. probes on a plain communicator are the MPI library's");
    MPI_Comm p;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &p));
    uint64_t out = 9000u + (uint64_t)t_rank, in = 0;
    MPI_Request sr;
    MPI_Status st;
    for (int round = 0; round < 3; round++) {
        T_MPI(MPI_Isend(&out, 1, MPI_UINT64_T, next, 6, p, &sr));
        if (round == 0) {
            T_MPI(MPI_Probe(prev, 6, p, &st));
        } else if (round == 1) {
            int flag = 0;
            while (!flag)
                T_MPI(MPI_Iprobe(prev, 6, p, &flag, &st));
        } else {
            MPI_Message m;
            T_MPI(MPI_Mprobe(prev, 6, p, &m, &st));
            T_MPI(MPI_Mrecv(&in, 1, MPI_UINT64_T, &m, MPI_STATUS_IGNORE));
        }
        T_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 6, "round %d: probe status %d/%d", round,
                st.MPI_SOURCE, st.MPI_TAG);
        if (round < 2)
            T_MPI(MPI_Recv(&in, 1, MPI_UINT64_T, prev, 6, p, MPI_STATUS_IGNORE));
        T_CHECK(in == 9000u + (uint64_t)prev, "round %d: received %llu", round,
                (unsigned long long)in);
        T_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    }
    T_MPI(MPI_Comm_free(&p));
}

int main(int argc, char **argv)
{
    /* this rank's log in a file of its own (read back in phase 2) */
    snprintf(logpath, sizeof logpath, "/tmp/mpixacc-probes-%d.log", (int)getpid());
    unlink(logpath);
    setenv("MPIX_ACC_LOG_FILE", logpath, 1);
    t_init(&argc, &argv, "probes", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPI_Comm c = t_stream_comm(&S);
    stream_comm_probes(c);
    plain_comm_probes();
    t_stream_comm_free(&c, &S);
    int rc = t_finish();
    unlink(logpath);
    return rc;
}
