/*
 * log.h - the one logging facility of mpix-acc: MXU_LOG(level, fmt, ...).
 *
 * The threshold comes from the MPIX_ACC_LOG setting (error|warn|info|debug).
 * Messages go to stderr prefixed with "[mpix-acc <host>:<pid> r<rank>] LEVEL".
 */
#ifndef MXU_LOG_H
#define MXU_LOG_H

#include <stdarg.h>

typedef enum {
    MXU_LOG_ERROR = 0,
    MXU_LOG_WARN = 1,
    MXU_LOG_INFO = 2,
    MXU_LOG_DEBUG = 3,
} mxu_log_level_t;

extern int mxu_log_threshold; /* current level; read without locks */

void mxu_log_emit(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Set the rank shown in the prefix (-1 before MPI_Init). */
void mxu_log_set_rank(int rank);
/* Parse a level name; returns -1 if unknown. */
int mxu_log_parse_level(const char *name);

#define MXU_LOG(level, ...)                                                                        \
    do {                                                                                           \
        if ((int)(level) <= mxu_log_threshold)                                                     \
            mxu_log_emit((level), __FILE__, __LINE__, __VA_ARGS__);                                \
    } while (0)

#endif
