/*
 * test_config.c - the MPIX_ACC_* settings registry (util/settings.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_check.h"
#include "util/settings.h"
#include "util/log.h"

static void test_table(void)
{
    int expected = 0;
#define COUNT_(name, type, field, def, help) expected++;
    MX_CONFIG_TABLE(COUNT_)
#undef COUNT_
    CHECK_EQ_LL(mxu_config_count(), expected);
    CHECK(mxu_config_entry(-1) == NULL);
    CHECK(mxu_config_entry(expected) == NULL);

    for (int i = 0; i < mxu_config_count(); i++) {
        const mxu_config_entry_t *e = mxu_config_entry(i);
        CHECK(e != NULL && e->name != NULL && e->help != NULL && e->default_value != NULL);
        CHECK(strncmp(e->name, "MPIX_ACC_", 9) == 0, "%s", e->name);
        CHECK(strlen(e->help) > 10, "%s has no help", e->name);
        /* every default parses with its own type */
        union {
            int i;
            long l;
            size_t z;
            double d;
            const char *s;
        } v;
        CHECK(mxu_config_parse_value(e->type, e->default_value, &v) == MX_OK,
              "default of %s does not parse: \"%s\"", e->name, e->default_value);
    }
}

static void test_defaults(void)
{
    /* before mxu_config_load(): the defaults of the table */
    CHECK_EQ_LL(mxu_config.disable, 0);
    CHECK_EQ_LL(mxu_config.log_level, MX_LOG_WARN);
    CHECK_EQ_LL(mxu_config.progress_cpu, -1);
    CHECK_EQ_LL(mxu_config.progress_spin_us, 100);
    CHECK_EQ_LL(mxu_config.wait_spin_us, 20);
    CHECK_EQ_LL(mxu_config.eager_limit, 8192);
    CHECK_STR(mxu_config.recv_post, "ordered");
    CHECK(mxu_config.finalize_timeout == 10.0);
    CHECK_EQ_LL(mxu_config.cuda, 1);
    CHECK_EQ_LL(mxu_config.stats, 0);
}

static void test_parse_size(void)
{
    static const struct {
        const char *text;
        size_t value;
    } good[] = {
        {"0", 0},          {"8192", 8192},       {"8k", 8192},          {"8K", 8192},
        {"1m", 1u << 20},  {"3M", 3u << 20},     {"2g", 2ull << 30},    {"2G", 2ull << 30},
        {"4kb", 4096},     {"4KB", 4096},        {"1MiB", 1u << 20},    {"  16 ", 16},
        {"64 k", 65536},   {"100b", 100},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 12345;
        CHECK(mxu_parse_size(good[i].text, &v) == MX_OK, "\"%s\" rejected", good[i].text);
        CHECK(v == good[i].value, "\"%s\" -> %zu, expected %zu", good[i].text, v,
              good[i].value);
    }
    static const char *const bad[] = {"",    " ",   "abc", "-1",  "1.5k", "8x", "k",
                                      "8kk", "8 k b", "0x10", "99999999999999999999",
                                      "18014398509481984g", "+5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 777;
        CHECK(mxu_parse_size(bad[i], &v) != MX_OK, "\"%s\" accepted", bad[i]);
        CHECK(v == 777, "output written on failure for \"%s\"", bad[i]);
    }
    CHECK(mxu_parse_size(NULL, &(size_t){0}) != MX_OK);
}

static void test_parse_types(void)
{
    static const char *const yes[] = {"1", "yes", "YES", "true", "True", "on", "ON", " on "};
    static const char *const no[] = {"0", "no", "No", "false", "FALSE", "off", "Off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        int b = -1;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, yes[i], &b) == MX_OK && b == 1, "%s", yes[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        int b = -1;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, no[i], &b) == MX_OK && b == 0, "%s", no[i]);
    }
    static const char *const badbool[] = {"2", "maybe", "", "yess", "o"};
    for (size_t i = 0; i < sizeof(badbool) / sizeof(badbool[0]); i++) {
        int b = 5;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, badbool[i], &b) != MX_OK && b == 5, "%s",
              badbool[i]);
    }

    long l = 0;
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "-2", &l) == MX_OK && l == -2);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, " 42 ", &l) == MX_OK && l == 42);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "4x", &l) != MX_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "", &l) != MX_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "99999999999999999999999", &l) != MX_OK);

    double d = 0;
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "2.5", &d) == MX_OK && d == 2.5);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "1e3", &d) == MX_OK && d == 1000.0);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "nan", &d) != MX_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "1e999", &d) != MX_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "3s", &d) != MX_OK);

    int lv = -1;
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "debug", &lv) == MX_OK && lv == MX_LOG_DEBUG);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "INFO", &lv) == MX_OK && lv == MX_LOG_INFO);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "warning", &lv) == MX_OK && lv == MX_LOG_WARN);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "error", &lv) == MX_OK && lv == MX_LOG_ERROR);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "verbose", &lv) != MX_OK);

    const char *s = NULL;
    CHECK(mxu_config_parse_value(MXU_CFG_STRING, "early", &s) == MX_OK && strcmp(s, "early") == 0);
    CHECK(mxu_config_parse_value(MXU_CFG_BOOL, NULL, &lv) != MX_OK);
}

static int row_of(const char *name)
{
    for (int i = 0; i < mxu_config_count(); i++)
        if (strcmp(mxu_config_entry(i)->name, name) == 0)
            return i;
    CHECK(0, "no row %s", name);
    return -1;
}

static void test_load(void)
{
    /* clean slate: no MPIX_ACC_* from the caller's environment */
    for (int i = 0; i < mxu_config_count(); i++)
        unsetenv(mxu_config_entry(i)->name);

    setenv("MPIX_ACC_EAGER_LIMIT", "64k", 1);
    setenv("MPIX_ACC_STATS", "yes", 1);
    setenv("MPIX_ACC_PROGRESS_SPIN_US", "abc", 1);
    setenv("MPIX_ACC_RECV_POST", "early", 1);
    setenv("MPIX_ACC_EAGR_LIMIT", "1", 1);      /* typo of a known name */
    setenv("MPIX_ACC_LOG", "info", 1);
    setenv("MPIX_ACC_FINALIZE_TIMEOUT", "", 1); /* empty: unset */

    capture_begin();
    CHECK(mxu_config_load() == MX_OK);
    char *out = capture_end();

    CHECK_EQ_LL(mxu_config.eager_limit, 65536);
    CHECK_EQ_LL(mxu_config.stats, 1);
    CHECK_EQ_LL(mxu_config.progress_spin_us, 100); /* malformed: default kept */
    CHECK_STR(mxu_config.recv_post, "early");
    CHECK_EQ_LL(mxu_config.log_level, MX_LOG_INFO);
    CHECK_EQ_LL(mxu_log_threshold, MX_LOG_INFO);
    CHECK(mxu_config.finalize_timeout == 10.0);
    CHECK_EQ_LL(mxu_config_entry(row_of("MPIX_ACC_EAGER_LIMIT"))->from_env, 1);
    CHECK_EQ_LL(mxu_config_entry(row_of("MPIX_ACC_PROGRESS_SPIN_US"))->from_env, 0);
    CHECK_EQ_LL(mxu_config_entry(row_of("MPIX_ACC_FINALIZE_TIMEOUT"))->from_env, 0);
    CHECK_EQ_LL(mxu_config_entry(row_of("MPIX_ACC_DISABLE"))->from_env, 0);

    CHECK(count_substr(out, "MPIX_ACC_PROGRESS_SPIN_US=\"abc\"") == 1, "output:\n%s", out);
    CHECK(count_substr(out, "unknown setting MPIX_ACC_EAGR_LIMIT") == 1, "output:\n%s", out);
    CHECK(count_substr(out, "closest known setting: MPIX_ACC_EAGER_LIMIT") == 1, "output:\n%s",
          out);
    CHECK(count_substr(out, "] WARN ") == 2, "exactly two warnings expected:\n%s", out);
    free(out);

    /* idempotent: the same environment warns no more */
    capture_begin();
    CHECK(mxu_config_load() == MX_OK);
    out = capture_end();
    CHECK(out[0] == '\0', "second load printed:\n%s", out);
    free(out);
    CHECK_EQ_LL(mxu_config.eager_limit, 65536);

    /* a different malformed value is reported again; unsetting restores defaults */
    setenv("MPIX_ACC_PROGRESS_SPIN_US", "12q", 1);
    unsetenv("MPIX_ACC_EAGER_LIMIT");
    capture_begin();
    mxu_config_load();
    out = capture_end();
    CHECK(count_substr(out, "MPIX_ACC_PROGRESS_SPIN_US=\"12q\"") == 1, "output:\n%s", out);
    CHECK(count_substr(out, "EAGR") == 0, "unknown variable warned twice:\n%s", out);
    free(out);
    CHECK_EQ_LL(mxu_config.eager_limit, 8192);
    CHECK_EQ_LL(mxu_config_entry(row_of("MPIX_ACC_EAGER_LIMIT"))->from_env, 0);

    /* MPIX_ACC_LOG=error silences the warnings of the same load */
    setenv("MPIX_ACC_LOG", "error", 1);
    setenv("MPIX_ACC_ANOTHER_TYPO", "1", 1);
    setenv("MPIX_ACC_STATS", "perhaps", 1);
    capture_begin();
    mxu_config_load();
    out = capture_end();
    CHECK(out[0] == '\0', "warnings printed at MPIX_ACC_LOG=error:\n%s", out);
    free(out);
    CHECK_EQ_LL(mxu_log_threshold, MX_LOG_ERROR);
    CHECK_EQ_LL(mxu_config.stats, 0);

    /* a malformed log level keeps "warn" and is reported */
    setenv("MPIX_ACC_LOG", "loud", 1);
    unsetenv("MPIX_ACC_ANOTHER_TYPO");
    unsetenv("MPIX_ACC_EAGR_LIMIT");
    capture_begin();
    mxu_config_load();
    out = capture_end();
    CHECK_EQ_LL(mxu_log_threshold, MX_LOG_WARN);
    CHECK(count_substr(out, "MPIX_ACC_LOG=\"loud\"") == 1, "output:\n%s", out);
    free(out);

    /* hints for abbreviations and words of known names */
    setenv("MPIX_ACC_EAGER", "1", 1);
    setenv("MPIX_ACC_PROGRES_CPU", "1", 1);
    capture_begin();
    mxu_config_load();
    out = capture_end();
    CHECK(strstr(out, "MPIX_ACC_EAGER is ignored (closest known setting: MPIX_ACC_EAGER_LIMIT") !=
              NULL,
          "output:\n%s", out);
    CHECK(strstr(out, "MPIX_ACC_PROGRES_CPU is ignored (closest known setting: "
                      "MPIX_ACC_PROGRESS_CPU") != NULL,
          "output:\n%s", out);
    free(out);
    unsetenv("MPIX_ACC_EAGER");
    unsetenv("MPIX_ACC_PROGRES_CPU");
}

static void test_print(void)
{
    setenv("MPIX_ACC_EAGER_LIMIT", "1m", 1);
    setenv("MPIX_ACC_LOG", "warn", 1);
    unsetenv("MPIX_ACC_PROGRESS_SPIN_US");
    unsetenv("MPIX_ACC_STATS");
    mxu_config_load();

    char value[64];
    mxu_config_value_string(row_of("MPIX_ACC_EAGER_LIMIT"), value, sizeof(value));
    CHECK_STR(value, "1048576");
    mxu_config_value_string(row_of("MPIX_ACC_LOG"), value, sizeof(value));
    CHECK_STR(value, "warn");
    mxu_config_value_string(row_of("MPIX_ACC_FINALIZE_TIMEOUT"), value, sizeof(value));
    CHECK_STR(value, "10");
    mxu_config_value_string(row_of("MPIX_ACC_RECV_POST"), value, sizeof(value));
    CHECK_STR(value, "early");
    mxu_config_value_string(row_of("MPIX_ACC_CUDA"), value, sizeof(value));
    CHECK_STR(value, "1");
    mxu_config_value_string(999, value, sizeof(value));
    CHECK_STR(value, "");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    mxu_config_print(f, 1);
    fclose(f);
    CHECK(strstr(text, "MPIX_ACC_EAGER_LIMIT=1048576    # set in the environment\n") != NULL,
          "%s", text);
    CHECK(strstr(text, "MPIX_ACC_DISABLE=0\n    # Make every MPI wrapper") != NULL, "%s", text);
    CHECK(strstr(text, "default: 8192]") != NULL, "%s", text);
    for (int i = 0; i < mxu_config_count(); i++) {
        char head[96];
        snprintf(head, sizeof(head), "%s=", mxu_config_entry(i)->name);
        CHECK(count_substr(text, head) == 1, "%s missing or repeated", head);
    }
    /* every line is a setting or a wrapped comment no wider than 80 columns */
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        CHECK(strncmp(line, "MPIX_ACC_", 9) == 0 || strncmp(line, "    # ", 6) == 0, "%s", line);
        if (line[0] == ' ')
            CHECK(strlen(line) <= 80, "long help line: %s", line);
    }
    free(text);

    f = open_memstream(&text, &len);
    mxu_config_print(f, 0);
    fclose(f);
    CHECK(strstr(text, "\n    # ") == NULL && strncmp(text, "    # ", 6) != 0,
          "help printed without with_help:\n%s", text);
    CHECK(count_substr(text, "\n") == mxu_config_count());
    free(text);
}

int main(void)
{
    test_table();
    test_defaults();
    test_parse_size();
    test_parse_types();
    test_load();
    test_print();
    TEST_PASS("test_config");
}
