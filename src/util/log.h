/*
 * log.h - the one logging facility of mpix-acc: MXU_LOG(level, fmt, ...).
 *
 * The threshold comes from the MPIX_ACC_LOG setting (error|warn|info|debug).
 * Messages go to stderr, or to the MPIX_ACC_LOG_FILE (%h host, %p pid),
 * prefixed with
 *   "[mpix-acc <host>:<pid> r<rank> t<thread id> <hh:mm:ss.uuuuuu>] LEVEL file.c:N: ".
 */
#ifndef MXU_LOG_H
#define MXU_LOG_H

#include <stdarg.h>
#include <stddef.h>

typedef enum {
    MXU_LOG_ERROR = 0,
    MXU_LOG_WARN = 1,
    MXU_LOG_INFO = 2,
    MXU_LOG_DEBUG = 3,
} mxu_log_level_t;

extern int mxu_log_threshold; /* current level; read without locks */

void mxu_log_emit(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same, printed whatever the threshold: output the user asked for with a
 * setting (MPIX_ACC_STATS), labelled with its level. */
void mxu_log_emit_forced(mxu_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Set the rank shown in the prefix (-1 before MPI_Init). */
void mxu_log_set_rank(int rank);
/* Parse a level name; returns -1 if unknown. */
int mxu_log_parse_level(const char *name);
/* Send messages to the file named by `pattern` ("" or NULL: stderr): %h is
 * replaced by the host name (up to the first dot), %p by the process id, %%
 * by %; the file is opened for appending at the next message. */
void mxu_log_set_file(const char *pattern);
/* `pattern` with %h, %p and %% replaced, into out; -1 when it does not fit. */
int mxu_log_expand_path(const char *pattern, char *out, size_t len);

#define MXU_LOG(level, ...)                                                                        \
    do {                                                                                           \
        if ((int)(level) <= mxu_log_threshold)                                                     \
            mxu_log_emit((level), __FILE__, __LINE__, __VA_ARGS__);                                \
    } while (0)

/* MXU_LOG whatever the threshold (see mxu_log_emit_forced). */
#define MXU_LOG_FORCED(level, ...) mxu_log_emit_forced((level), __FILE__, __LINE__, __VA_ARGS__)

#endif
