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

static int row_of(const char *name);

static void test_table(void)
{
    int expected = 0;
#define COUNT_(name, type, field, def, range, help) expected++;
    MXU_CONFIG_TABLE(COUNT_)
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
        CHECK(mxu_config_parse_value(e->type, e->default_value, &v) == MXU_OK,
              "default of %s does not parse: \"%s\"", e->name, e->default_value);

        /* every numeric and string row has a range that parses; the default
         * lies in it, and so do both bounds */
        CHECK(e->range != NULL);
        if (e->type == MXU_CFG_BOOL || e->type == MXU_CFG_LOGLEVEL) {
            CHECK(e->range[0] == '\0', "%s: a %s row has its type's words", e->name,
                  e->type == MXU_CFG_BOOL ? "bool" : "log level");
        } else if (e->type == MXU_CFG_STRING) {
            CHECK(e->range[0] != '\0' && strstr(e->range, "..") == NULL, "%s: words expected",
                  e->name);
        } else {
            const char *dots = strstr(e->range, "..");
            CHECK(dots != NULL && dots > e->range && dots[2] != '\0', "%s: range \"%s\"", e->name,
                  e->range);
            char lo[64], hi[64];
            snprintf(lo, sizeof(lo), "%.*s", (int)(dots - e->range), e->range);
            snprintf(hi, sizeof(hi), "%s", dots + 2);
            CHECK(mxu_config_parse_setting(i, lo, &v) == MXU_OK, "%s: lower bound %s", e->name, lo);
            CHECK(mxu_config_parse_setting(i, hi, &v) == MXU_OK, "%s: upper bound %s", e->name, hi);
        }
        CHECK(mxu_config_parse_setting(i, e->default_value, &v) == MXU_OK,
              "default of %s is outside its range %s: \"%s\"", e->name, e->range, e->default_value);
        char accepted[256];
        mxu_config_describe(i, accepted, sizeof(accepted));
        CHECK(e->range[0] == '\0' || strstr(accepted, e->range) != NULL, "%s: %s", e->name,
              accepted);
    }
    CHECK(mxu_config_parse_setting(-1, "1", &(long){0}) != MXU_OK);
    CHECK(mxu_config_parse_setting(expected, "1", &(long){0}) != MXU_OK);
}

/* The ranges: bounds and the special values the help documents are
 * accepted, one step outside is not, and nothing is written on failure. */
static void test_ranges(void)
{
    static const struct {
        const char *var, *value;
        int ok;
    } cases[] = {
        {"MPIX_ACC_PROGRESS_CPU", "-2", 1},
        {"MPIX_ACC_PROGRESS_CPU", "-1", 1},
        {"MPIX_ACC_PROGRESS_CPU", "0", 1},
        {"MPIX_ACC_PROGRESS_CPU", "8191", 1},
        {"MPIX_ACC_PROGRESS_CPU", "-3", 0},
        {"MPIX_ACC_PROGRESS_CPU", "8192", 0},
        {"MPIX_ACC_PROGRESS_SPIN_US", "0", 1},
        {"MPIX_ACC_PROGRESS_SPIN_US", "-1", 0},
        {"MPIX_ACC_PROGRESS_SPIN_US", "1000001", 0},
        {"MPIX_ACC_PROGRESS_POLL_US", "1", 1},
        {"MPIX_ACC_PROGRESS_POLL_US", "0", 0},
        {"MPIX_ACC_WAIT_SPIN_US", "0", 1},
        {"MPIX_ACC_WAIT_SPIN_US", "1000000", 1},
        {"MPIX_ACC_WAIT_SPIN_US", "-1", 0},
        {"MPIX_ACC_EAGER_LIMIT", "0", 1},
        {"MPIX_ACC_EAGER_LIMIT", "1g", 1},
        {"MPIX_ACC_EAGER_LIMIT", "1073741825", 0},
        {"MPIX_ACC_EAGER_LIMIT", "-1", 0},
        {"MPIX_ACC_RECV_POST", "early", 1},
        {"MPIX_ACC_RECV_POST", " ordered ", 1},
        {"MPIX_ACC_RECV_POST", "earl", 0},
        {"MPIX_ACC_RECV_POST", "early|ordered", 0},
        {"MPIX_ACC_RECV_POST", "", 0},
        {"MPIX_ACC_RECV_POST", "EARLY", 0},
        {"MPIX_ACC_MAX_PENDING", "1", 1},
        {"MPIX_ACC_MAX_PENDING", "100000000", 1},
        {"MPIX_ACC_MAX_PENDING", "0", 0},
        {"MPIX_ACC_MAX_PENDING", "-1", 0},
        {"MPIX_ACC_MAX_PENDING", "1000000001", 0},
        {"MPIX_ACC_STREAM_DEPTH", "0", 1},
        {"MPIX_ACC_STREAM_DEPTH", "1000000000", 1},
        {"MPIX_ACC_STREAM_DEPTH", "-1", 0},
        {"MPIX_ACC_STREAM_DEPTH", "1000000001", 0},
        {"MPIX_ACC_FINALIZE_TIMEOUT", "0", 1},
        {"MPIX_ACC_FINALIZE_TIMEOUT", "0.5", 1},
        {"MPIX_ACC_FINALIZE_TIMEOUT", "86400", 1},
        {"MPIX_ACC_FINALIZE_TIMEOUT", "-0.1", 0},
        {"MPIX_ACC_FINALIZE_TIMEOUT", "1e6", 0},
        {"MPIX_ACC_STATS", "on", 1},
        {"MPIX_ACC_STATS", "2", 0},
        {"MPIX_ACC_LOG", "debug", 1},
        {"MPIX_ACC_LOG", "loud", 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        union {
            int i;
            long l;
            size_t z;
            double d;
            const char *s;
        } v;
        memset(&v, 0x5a, sizeof(v));
        unsigned char before[sizeof(v)];
        memcpy(before, &v, sizeof(v));
        mxu_status_t st = mxu_config_parse_setting(row_of(cases[c].var), cases[c].value, &v);
        CHECK((st == MXU_OK) == cases[c].ok, "%s=\"%s\" %s", cases[c].var, cases[c].value,
              cases[c].ok ? "rejected" : "accepted");
        if (!cases[c].ok)
            CHECK(memcmp(before, &v, sizeof(v)) == 0, "%s=\"%s\": output written on failure",
                  cases[c].var, cases[c].value);
    }
}

static void test_defaults(void)
{
    /* before mxu_config_load(): the defaults of the table */
    CHECK_EQ_LL(mxu_config.disable, 0);
    CHECK_EQ_LL(mxu_config.log_level, MXU_LOG_WARN);
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
        {"0", 0},           {"8192", 8192},     {"8k", 8192},       {"8K", 8192},  {"1m", 1u << 20},
        {"3M", 3u << 20},   {"2g", 2ull << 30}, {"2G", 2ull << 30}, {"4kb", 4096}, {"4KB", 4096},
        {"1MiB", 1u << 20}, {"  16 ", 16},      {"64 k", 65536},    {"100b", 100},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 12345;
        CHECK(mxu_parse_size(good[i].text, &v) == MXU_OK, "\"%s\" rejected", good[i].text);
        CHECK(v == good[i].value, "\"%s\" -> %zu, expected %zu", good[i].text, v, good[i].value);
    }
    static const char *const bad[] = {"",
                                      " ",
                                      "abc",
                                      "-1",
                                      "1.5k",
                                      "8x",
                                      "k",
                                      "8kk",
                                      "8 k b",
                                      "0x10",
                                      "99999999999999999999",
                                      "18014398509481984g",
                                      "+5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 777;
        CHECK(mxu_parse_size(bad[i], &v) != MXU_OK, "\"%s\" accepted", bad[i]);
        CHECK(v == 777, "output written on failure for \"%s\"", bad[i]);
    }
    CHECK(mxu_parse_size(NULL, &(size_t){0}) != MXU_OK);
}

static void test_parse_types(void)
{
    static const char *const yes[] = {"1", "yes", "YES", "true", "True", "on", "ON", " on "};
    static const char *const no[] = {"0", "no", "No", "false", "FALSE", "off", "Off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        int b = -1;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, yes[i], &b) == MXU_OK && b == 1, "%s", yes[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        int b = -1;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, no[i], &b) == MXU_OK && b == 0, "%s", no[i]);
    }
    static const char *const badbool[] = {"2", "maybe", "", "yess", "o"};
    for (size_t i = 0; i < sizeof(badbool) / sizeof(badbool[0]); i++) {
        int b = 5;
        CHECK(mxu_config_parse_value(MXU_CFG_BOOL, badbool[i], &b) != MXU_OK && b == 5, "%s",
              badbool[i]);
    }

    long l = 0;
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "-2", &l) == MXU_OK && l == -2);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, " 42 ", &l) == MXU_OK && l == 42);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "4x", &l) != MXU_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "", &l) != MXU_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_INT, "99999999999999999999999", &l) != MXU_OK);

    double d = 0;
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "2.5", &d) == MXU_OK && d == 2.5);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "1e3", &d) == MXU_OK && d == 1000.0);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "nan", &d) != MXU_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "1e999", &d) != MXU_OK);
    CHECK(mxu_config_parse_value(MXU_CFG_DOUBLE, "3s", &d) != MXU_OK);

    int lv = -1;
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "debug", &lv) == MXU_OK && lv == MXU_LOG_DEBUG);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "INFO", &lv) == MXU_OK && lv == MXU_LOG_INFO);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "warning", &lv) == MXU_OK && lv == MXU_LOG_WARN);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "error", &lv) == MXU_OK && lv == MXU_LOG_ERROR);
    CHECK(mxu_config_parse_value(MXU_CFG_LOGLEVEL, "verbose", &lv) != MXU_OK);

    const char *s = NULL;
    CHECK(mxu_config_parse_value(MXU_CFG_STRING, "early", &s) == MXU_OK && strcmp(s, "early") == 0);
    CHECK(mxu_config_parse_value(MXU_CFG_BOOL, NULL, &lv) != MXU_OK);
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
    setenv("MPIX_ACC_EAGR_LIMIT", "1", 1); /* typo of a known name */
    setenv("MPIX_ACC_LOG", "info", 1);
    setenv("MPIX_ACC_FINALIZE_TIMEOUT", "", 1); /* empty: unset */

    capture_begin();
    CHECK(mxu_config_load() == MXU_OK);
    char *out = capture_end();

    CHECK_EQ_LL(mxu_config.eager_limit, 65536);
    CHECK_EQ_LL(mxu_config.stats, 1);
    CHECK_EQ_LL(mxu_config.progress_spin_us, 100); /* malformed: default kept */
    CHECK_STR(mxu_config.recv_post, "early");
    CHECK_EQ_LL(mxu_config.log_level, MXU_LOG_INFO);
    CHECK_EQ_LL(mxu_log_threshold, MXU_LOG_INFO);
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
    CHECK(mxu_config_load() == MXU_OK);
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
    CHECK_EQ_LL(mxu_log_threshold, MXU_LOG_ERROR);
    CHECK_EQ_LL(mxu_config.stats, 0);

    /* a malformed log level keeps "warn" and is reported */
    setenv("MPIX_ACC_LOG", "loud", 1);
    unsetenv("MPIX_ACC_ANOTHER_TYPO");
    unsetenv("MPIX_ACC_EAGR_LIMIT");
    capture_begin();
    mxu_config_load();
    out = capture_end();
    CHECK_EQ_LL(mxu_log_threshold, MXU_LOG_WARN);
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

/* Issue 13 item 6: out-of-range and malformed values are reported, naming the
 * variable, the value and the default used instead, and the default is kept. */
static void test_out_of_range(void)
{
    static const struct {
        const char *var, *value, *default_text;
    } cases[] = {
        {"MPIX_ACC_STREAM_DEPTH", "-5", "128"}, /* turned the limit off */
        {"MPIX_ACC_MAX_PENDING", "0", "32768"}, /* every exchange failed after 11 s */
        {"MPIX_ACC_WAIT_SPIN_US", "-1", "20"},  /* host waits busy-spun */
        {"MPIX_ACC_RECV_POST", "bogus", "ordered"}, {"MPIX_ACC_FINALIZE_TIMEOUT", "-1", "10"},
        {"MPIX_ACC_PROGRESS_CPU", "-7", "-1"},      {"MPIX_ACC_PROGRESS_SPIN_US", "-5", "100"},
        {"MPIX_ACC_STREAM_DEPTH", "12abc", "128"}, /* does not parse */
        {"MPIX_ACC_MAX_PENDING", " 7 x", "32768"},  {"MPIX_ACC_FINALIZE_TIMEOUT", "soon", "10"},
    };
    int failed = 0;
    for (int i = 0; i < mxu_config_count(); i++)
        unsetenv(mxu_config_entry(i)->name);
    mxu_config_load();

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        setenv(cases[c].var, cases[c].value, 1);
        capture_begin();
        mxu_config_load();
        char *out = capture_end();
        unsetenv(cases[c].var);

        /* every case is checked and reported before the test fails */
        char value[64], named[160], used[160];
        mxu_config_value_string(row_of(cases[c].var), value, sizeof(value));
        snprintf(named, sizeof(named), "%s=\"%s\"", cases[c].var, cases[c].value);
        snprintf(used, sizeof(used), "using the default %s", cases[c].default_text);
        int ok_value = strcmp(value, cases[c].default_text) == 0 &&
                       mxu_config_entry(row_of(cases[c].var))->from_env == 0;
        int ok_warning = count_substr(out, named) == 1 && count_substr(out, used) == 1 &&
                         count_substr(out, "] WARN ") == 1;
        if (!ok_value || !ok_warning) {
            fprintf(stderr, "FAIL %s: value used %s (default %s); %s\n", named, value,
                    cases[c].default_text,
                    ok_warning ? "warned" : "no single warning naming it and the default");
            failed++;
        }
        free(out);
    }
    CHECK(failed == 0, "%d of %d bad values accepted or not reported", failed,
          (int)(sizeof(cases) / sizeof(cases[0])));
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
    CHECK(strstr(text, "MPIX_ACC_EAGER_LIMIT=1048576    # set in the environment\n") != NULL, "%s",
          text);
    CHECK(strstr(text, "MPIX_ACC_DISABLE=0\n    # Make every MPI wrapper") != NULL, "%s", text);
    CHECK(strstr(text, "default: 8192]") != NULL, "%s", text);
    /* what each setting accepts, its range or its words (help unwrapped) */
    char *flat = strdup(text);
    CHECK(flat != NULL);
    for (char *w; (w = strstr(flat, "\n    # ")) != NULL;)
        memmove(w + 1, w + 7, strlen(w + 7) + 1), w[0] = ' ';
    CHECK(strstr(flat, "[integer -2..8191; default: -1]") != NULL, "%s", flat);
    CHECK(strstr(flat, "[one of ordered|early; default: ordered]") != NULL, "%s", flat);
    CHECK(strstr(flat, "[number 0..86400; default: 10]") != NULL, "%s", flat);
    CHECK(strstr(flat, "[size 0..1g, in bytes, k/m/g suffixes allowed; default: 8192]") != NULL,
          "%s", flat);
    CHECK(strstr(flat, "[log level: error, warn, info, debug; default: warn]") != NULL, "%s", flat);
    for (int i = 0; i < mxu_config_count(); i++) {
        char accepted[256], tail[320];
        mxu_config_describe(i, accepted, sizeof(accepted));
        snprintf(tail, sizeof(tail), "[%s; default: %s]\n", accepted,
                 mxu_config_entry(i)->default_value);
        CHECK(strstr(flat, tail) != NULL, "%s not printed:\n%s", tail, flat);
    }
    free(flat);
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
    test_ranges();
    test_load();
    test_print();
    test_out_of_range();
    TEST_PASS("test_config");
}
