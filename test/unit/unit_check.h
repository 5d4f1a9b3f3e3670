/*
 * unit_check.h - minimal assertions for the unit tests (no MPI, no
 * framework). A failed CHECK prints where and why and exits with status 1.
 */
#ifndef MX_UNIT_CHECK_H
#define MX_UNIT_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, " " __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_LL(a, b)                                                                          \
    do {                                                                                           \
        long long ca_ = (long long)(a), cb_ = (long long)(b);                                      \
        CHECK(ca_ == cb_, "%s = %lld, expected %lld", #a, ca_, cb_);                               \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        CHECK(sa_ != NULL && strcmp(sa_, sb_) == 0, "%s = \"%s\", expected \"%s\"", #a,            \
              sa_ ? sa_ : "(null)", sb_);                                                          \
    } while (0)

#define TEST_PASS(name)                                                                            \
    do {                                                                                           \
        printf("PASS %s\n", name);                                                                 \
        return 0;                                                                                  \
    } while (0)

/* Capture what the code under test writes on stderr (fd 2) into a string.
 * capture_end() returns a malloc'd NUL-terminated copy. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int capture_saved_fd_ = -1;
static int capture_file_fd_ = -1;

static inline void capture_begin(void)
{
    char path[] = "/tmp/mx-unit-capture-XXXXXX";
    fflush(stderr);
    capture_file_fd_ = mkstemp(path);
    CHECK(capture_file_fd_ >= 0, "mkstemp failed");
    unlink(path);
    int fl = fcntl(capture_file_fd_, F_GETFL);
    fcntl(capture_file_fd_, F_SETFL, fl | O_APPEND);
    capture_saved_fd_ = dup(2);
    CHECK(capture_saved_fd_ >= 0, "dup failed");
    CHECK(dup2(capture_file_fd_, 2) == 2, "dup2 failed");
}

static inline char *capture_end(void)
{
    fflush(stderr);
    dup2(capture_saved_fd_, 2);
    close(capture_saved_fd_);
    off_t len = lseek(capture_file_fd_, 0, SEEK_END);
    CHECK(len >= 0, "lseek failed");
    char *buf = malloc((size_t)len + 1);
    CHECK(buf != NULL, "malloc failed");
    CHECK(pread(capture_file_fd_, buf, (size_t)len, 0) == len, "pread failed");
    buf[len] = '\0';
    close(capture_file_fd_);
    return buf;
}

static inline int count_substr(const char *hay, const char *needle)
{
    int n = 0;
    size_t l = strlen(needle);
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + l, needle))
        n++;
    return n;
}

#endif
