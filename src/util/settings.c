/*
 * settings.c - the MPIX_ACC_* settings registry, generated from
 * MXU_CONFIG_TABLE (util/settings.h).
 *
 * - mxu_config holds the defaults from program start (constructor) and the
 *   parsed environment after mxu_config_load().
 * - A malformed value, or one outside the row's range, is reported once (per
 *   distinct value), naming the variable, the value, what the row accepts and
 *   the default, which is kept. An empty value counts as unset.
 * - Every MPIX_ACC_* variable of the environment that is not in the table is
 *   reported once, with the closest known name as a hint.
 * - Strings taken from the environment are copied and never freed while the
 *   process lives (other threads may hold the pointers).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

#define MXU_ENV_PREFIX "MPIX_ACC_"

extern char **environ;

mxu_config_t mxu_config;

static mxu_config_entry_t rows[] = {
#define MXU_CFG_ROW_(name, type, field, def, range, help)                                          \
    {MXU_ENV_PREFIX #name, MXU_CFG_##type, def, range, help, 0},
    MXU_CONFIG_TABLE(MXU_CFG_ROW_)
#undef MXU_CFG_ROW_
};

static const size_t row_offset[] = {
#define MXU_CFG_OFF_(name, type, field, def, range, help) offsetof(mxu_config_t, field),
    MXU_CONFIG_TABLE(MXU_CFG_OFF_)
#undef MXU_CFG_OFF_
};

static const size_t row_size[] = {
#define MXU_CFG_SZ_(name, type, field, def, range, help) sizeof(((mxu_config_t *)0)->field),
    MXU_CONFIG_TABLE(MXU_CFG_SZ_)
#undef MXU_CFG_SZ_
};

#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;

/* Malformed values already reported, per row (the value text). */
static char *warned_value[sizeof(rows) / sizeof(rows[0])];

/* Unknown variable names already reported, and strings copied from the
 * environment: kept for the life of the process. */
typedef struct str_node {
    struct str_node *next;
    char text[];
} str_node_t;
static str_node_t *warned_unknown;
static str_node_t *kept_strings;

static const char *keep_string(const char *s)
{
    for (str_node_t *n = kept_strings; n != NULL; n = n->next) {
        if (strcmp(n->text, s) == 0)
            return n->text;
    }
    size_t len = strlen(s);
    str_node_t *n = malloc(sizeof(*n) + len + 1);
    if (n == NULL)
        return NULL;
    memcpy(n->text, s, len + 1);
    n->next = kept_strings;
    kept_strings = n;
    return n->text;
}

/* ---- parsing ---- */

/* Copy `value` without leading/trailing blanks into buf; 0 if it does not fit. */
static int trim_copy(const char *value, char *buf, size_t len)
{
    while (*value != '\0' && isspace((unsigned char)*value))
        value++;
    size_t n = strlen(value);
    while (n > 0 && isspace((unsigned char)value[n - 1]))
        n--;
    if (n + 1 > len)
        return 0;
    memcpy(buf, value, n);
    buf[n] = '\0';
    return 1;
}

static mxu_status_t parse_bool(const char *value, int *out)
{
    static const char *const yes[] = {"1", "yes", "true", "on", "y"};
    static const char *const no[] = {"0", "no", "false", "off", "n"};
    char buf[16];
    if (!trim_copy(value, buf, sizeof(buf)))
        return MXU_ERR_INVALID_PARAM;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(buf, yes[i]) == 0) {
            *out = 1;
            return MXU_OK;
        }
        if (strcasecmp(buf, no[i]) == 0) {
            *out = 0;
            return MXU_OK;
        }
    }
    return MXU_ERR_INVALID_PARAM;
}

static mxu_status_t parse_long(const char *value, long *out)
{
    char buf[64];
    if (!trim_copy(value, buf, sizeof(buf)) || buf[0] == '\0')
        return MXU_ERR_INVALID_PARAM;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return MXU_ERR_INVALID_PARAM;
    *out = v;
    return MXU_OK;
}

mxu_status_t mxu_parse_size(const char *value, size_t *out)
{
    char buf[64];
    if (value == NULL || out == NULL || !trim_copy(value, buf, sizeof(buf)) ||
        !isdigit((unsigned char)buf[0]))
        return MXU_ERR_INVALID_PARAM;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0)
        return MXU_ERR_INVALID_PARAM;
    while (*end == ' ' || *end == '\t')
        end++;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    /* optional unit: "b", "B", and after a multiplier also "iB"/"ib" */
    if (shift != 0 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B'))
        end += 2;
    else if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return MXU_ERR_INVALID_PARAM;
    if (shift != 0 && v > (SIZE_MAX >> shift))
        return MXU_ERR_INVALID_PARAM;
    if (v > SIZE_MAX)
        return MXU_ERR_INVALID_PARAM;
    *out = (size_t)v << shift;
    return MXU_OK;
}

static mxu_status_t parse_double(const char *value, double *out)
{
    char buf[64];
    if (!trim_copy(value, buf, sizeof(buf)) || buf[0] == '\0')
        return MXU_ERR_INVALID_PARAM;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v))
        return MXU_ERR_INVALID_PARAM;
    *out = v;
    return MXU_OK;
}

mxu_status_t mxu_config_parse_value(mxu_config_type_t type, const char *value, void *out)
{
    if (value == NULL || out == NULL)
        return MXU_ERR_INVALID_PARAM;
    switch (type) {
    case MXU_CFG_BOOL:
        return parse_bool(value, (int *)out);
    case MXU_CFG_INT:
        return parse_long(value, (long *)out);
    case MXU_CFG_SIZE:
        return mxu_parse_size(value, (size_t *)out);
    case MXU_CFG_DOUBLE:
        return parse_double(value, (double *)out);
    case MXU_CFG_STRING:
        /* the pointer is stored as is: the caller keeps `value` alive */
        *(const char **)out = value;
        return MXU_OK;
    case MXU_CFG_LOGLEVEL: {
        int level = mxu_log_parse_level(value);
        if (level < 0)
            return MXU_ERR_INVALID_PARAM;
        *(int *)out = level;
        return MXU_OK;
    }
    }
    return MXU_ERR_INVALID_PARAM;
}

static const char *type_description(mxu_config_type_t type)
{
    switch (type) {
    case MXU_CFG_BOOL:
        return "bool: 1/0, yes/no, true/false, on/off";
    case MXU_CFG_INT:
        return "integer";
    case MXU_CFG_SIZE:
        return "size in bytes, k/m/g suffixes allowed";
    case MXU_CFG_DOUBLE:
        return "number";
    case MXU_CFG_STRING:
        return "string";
    case MXU_CFG_LOGLEVEL:
        return "log level: error, warn, info, debug";
    }
    return "?";
}

/* ---- ranges: the one validation of a setting's value ---- */

typedef union {
    int i;
    long l;
    size_t z;
    double d;
    const char *s;
} cfg_value_t;

/* Split "lo..hi" of row i and parse both bounds with the row's type. */
static int range_bounds(int i, cfg_value_t *lo, cfg_value_t *hi)
{
    const char *range = rows[i].range;
    const char *dots = strstr(range, "..");
    char low[64];
    if (dots == NULL || (size_t)(dots - range) >= sizeof(low))
        return 0;
    memcpy(low, range, (size_t)(dots - range));
    low[dots - range] = '\0';
    return mxu_config_parse_value(rows[i].type, low, lo) == MXU_OK &&
           mxu_config_parse_value(rows[i].type, dots + 2, hi) == MXU_OK;
}

/* 1 when `word` (trimmed) is one of the '|'-separated words of `words`. */
static int word_in(const char *words, const char *word)
{
    size_t n = strlen(word);
    for (const char *w = words; *w != '\0';) {
        const char *bar = strchr(w, '|');
        size_t wl = bar != NULL ? (size_t)(bar - w) : strlen(w);
        if (wl == n && n > 0 && strncmp(w, word, n) == 0)
            return 1;
        if (bar == NULL)
            break;
        w = bar + 1;
    }
    return 0;
}

/* 1 when the parsed value *v of row i lies in the row's range. A row without
 * a range, or with one that does not parse (test_config rejects both where a
 * range is due), accepts whatever its type accepts. */
static int in_range(int i, const cfg_value_t *v)
{
    if (rows[i].range[0] == '\0')
        return 1;
    cfg_value_t lo, hi;
    switch (rows[i].type) {
    case MXU_CFG_INT:
        return !range_bounds(i, &lo, &hi) || (v->l >= lo.l && v->l <= hi.l);
    case MXU_CFG_SIZE:
        return !range_bounds(i, &lo, &hi) || (v->z >= lo.z && v->z <= hi.z);
    case MXU_CFG_DOUBLE:
        return !range_bounds(i, &lo, &hi) || (v->d >= lo.d && v->d <= hi.d);
    case MXU_CFG_STRING: {
        if (strcmp(rows[i].range, "*") == 0)
            return 1; /* any text */
        char word[256];
        return trim_copy(v->s, word, sizeof(word)) && word_in(rows[i].range, word);
    }
    case MXU_CFG_BOOL:
    case MXU_CFG_LOGLEVEL:
        return 1;
    }
    return 1;
}

mxu_status_t mxu_config_parse_setting(int i, const char *value, void *out)
{
    if (i < 0 || i >= NROWS || value == NULL || out == NULL)
        return MXU_ERR_INVALID_PARAM;
    cfg_value_t v;
    memset(&v, 0, sizeof(v));
    if (mxu_config_parse_value(rows[i].type, value, &v) != MXU_OK || !in_range(i, &v))
        return MXU_ERR_INVALID_PARAM;
    memcpy(out, &v, row_size[i]);
    return MXU_OK;
}

void mxu_config_describe(int i, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    if (i < 0 || i >= NROWS) {
        buf[0] = '\0';
        return;
    }
    const char *range = rows[i].range;
    if (range[0] == '\0')
        snprintf(buf, len, "%s", type_description(rows[i].type));
    else if (rows[i].type == MXU_CFG_STRING && strcmp(range, "*") == 0)
        snprintf(buf, len, "any text (*)");
    else if (rows[i].type == MXU_CFG_STRING)
        snprintf(buf, len, "one of %s", range);
    else if (rows[i].type == MXU_CFG_SIZE)
        snprintf(buf, len, "size %s, in bytes, k/m/g suffixes allowed", range);
    else
        snprintf(buf, len, "%s %s", rows[i].type == MXU_CFG_INT ? "integer" : "number", range);
}

/* ---- defaults and loading ---- */

static void *field_ptr(mxu_config_t *cfg, int i) { return (char *)cfg + row_offset[i]; }

static void apply_defaults(mxu_config_t *cfg)
{
    for (int i = 0; i < NROWS; i++) {
        /* The defaults are literals of the table: they parse (test_config
         * checks every one). */
        if (mxu_config_parse_value(rows[i].type, rows[i].default_value, field_ptr(cfg, i)) !=
            MXU_OK)
            memset(field_ptr(cfg, i), 0, row_size[i]);
    }
}

__attribute__((constructor)) static void config_constructor(void)
{
    pthread_mutex_lock(&config_lock);
    apply_defaults(&mxu_config);
    pthread_mutex_unlock(&config_lock);
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63)
        la = 63;
    if (lb > 63)
        lb = 63;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost =
                toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, (lb + 1) * sizeof(size_t));
    }
    return prev[lb];
}

static int find_row(const char *name, size_t len)
{
    for (int i = 0; i < NROWS; i++) {
        if (strlen(rows[i].name) == len && strncmp(rows[i].name, name, len) == 0)
            return i;
    }
    return -1;
}

static void warn_unknown_variables(void)
{
    const size_t plen = strlen(MXU_ENV_PREFIX);
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        const char *entry = *env;
        if (strncmp(entry, MXU_ENV_PREFIX, plen) != 0)
            continue;
        const char *eq = strchr(entry, '=');
        size_t len = eq != NULL ? (size_t)(eq - entry) : strlen(entry);
        if (find_row(entry, len) >= 0)
            continue;
        char name[128];
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, entry, len);
        name[len] = '\0';

        int seen = 0;
        for (str_node_t *n = warned_unknown; n != NULL && !seen; n = n->next)
            seen = strcmp(n->text, name) == 0;
        if (seen)
            continue;
        str_node_t *n = malloc(sizeof(*n) + len + 1);
        if (n != NULL) {
            memcpy(n->text, name, len + 1);
            n->next = warned_unknown;
            warned_unknown = n;
        }

        int best = 0;
        size_t best_d = SIZE_MAX;
        for (int i = 0; i < NROWS; i++) {
            /* typo, or an abbreviation of a longer name (MPIX_ACC_EAGER) */
            const char *known = rows[i].name + plen;
            size_t d = edit_distance(name + plen, known);
            size_t ulen = strlen(name + plen);
            if (ulen < strlen(known)) {
                char prefix[64];
                snprintf(prefix, sizeof(prefix), "%.*s", (int)ulen, known);
                size_t dp = edit_distance(name + plen, prefix) + 1;
                if (dp < d)
                    d = dp;
            }
            if (ulen >= 3 && strcasestr(known, name + plen) != NULL && d > 1)
                d = 1; /* a word of a known name (MPIX_ACC_SPIN) */
            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        MXU_LOG(MXU_LOG_WARN,
                "unknown setting %s is ignored (closest known setting: %s; "
                "`mpixacc_info -c` lists all settings)",
                name, rows[best].name);
    }
}

uint64_t mxu_wait_report_ns(void)
{
    return mxu_config.wait_report > 0 ? (uint64_t)(mxu_config.wait_report * 1e9) : 0;
}

mxu_status_t mxu_config_load(void)
{
    pthread_mutex_lock(&config_lock);

    mxu_config_t next;
    memset(&next, 0, sizeof(next));
    apply_defaults(&next);

    int from_env[sizeof(rows) / sizeof(rows[0])];
    int malformed[sizeof(rows) / sizeof(rows[0])];
    const char *envval[sizeof(rows) / sizeof(rows[0])];
    for (int i = 0; i < NROWS; i++) {
        from_env[i] = 0;
        malformed[i] = 0;
        envval[i] = getenv(rows[i].name);
        const char *v = envval[i];
        if (v == NULL || v[0] == '\0')
            continue;
        if (rows[i].type == MXU_CFG_STRING) {
            char trimmed[256];
            const char *kept = NULL, *checked;
            if (trim_copy(v, trimmed, sizeof(trimmed)) && trimmed[0] != '\0' &&
                mxu_config_parse_setting(i, trimmed, &checked) == MXU_OK)
                kept = keep_string(trimmed);
            if (kept == NULL) {
                malformed[i] = 1;
                continue;
            }
            *(const char **)field_ptr(&next, i) = kept;
            from_env[i] = 1;
        } else if (mxu_config_parse_setting(i, v, field_ptr(&next, i)) == MXU_OK) {
            from_env[i] = 1;
        } else {
            /* keep the default */
            mxu_config_parse_value(rows[i].type, rows[i].default_value, field_ptr(&next, i));
            malformed[i] = 1;
        }
    }

    /* Commit field by field, writing only what changed: other threads may
     * read settings without locks. */
    for (int i = 0; i < NROWS; i++) {
        void *dst = field_ptr(&mxu_config, i);
        const void *src = field_ptr(&next, i);
        if (memcmp(dst, src, row_size[i]) != 0)
            memcpy(dst, src, row_size[i]);
        rows[i].from_env = from_env[i];
    }
    if (mxu_log_threshold != mxu_config.log_level)
        mxu_log_threshold = mxu_config.log_level;
    mxu_log_set_file(mxu_config.log_file);

    /* Warnings after the threshold is set, so MPIX_ACC_LOG=error silences them. */
    for (int i = 0; i < NROWS; i++) {
        if (!malformed[i])
            continue;
        if (warned_value[i] != NULL && strcmp(warned_value[i], envval[i]) == 0)
            continue;
        free(warned_value[i]);
        warned_value[i] = strdup(envval[i]);
        char accepted[256];
        mxu_config_describe(i, accepted, sizeof(accepted));
        MXU_LOG(MXU_LOG_WARN, "%s=\"%s\" is not valid (%s); using the default %s", rows[i].name,
                envval[i], accepted, rows[i].default_value);
    }
    warn_unknown_variables();

    pthread_mutex_unlock(&config_lock);
    return MXU_OK;
}

/* ---- access and printing ---- */

int mxu_config_count(void) { return NROWS; }

const mxu_config_entry_t *mxu_config_entry(int i)
{
    if (i < 0 || i >= NROWS)
        return NULL;
    return &rows[i];
}

void mxu_config_value_string(int i, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    if (i < 0 || i >= NROWS) {
        buf[0] = '\0';
        return;
    }
    const void *p = field_ptr(&mxu_config, i);
    switch (rows[i].type) {
    case MXU_CFG_BOOL:
        snprintf(buf, len, "%d", *(const int *)p ? 1 : 0);
        break;
    case MXU_CFG_INT:
        snprintf(buf, len, "%ld", *(const long *)p);
        break;
    case MXU_CFG_SIZE:
        snprintf(buf, len, "%zu", *(const size_t *)p);
        break;
    case MXU_CFG_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)p);
        break;
    case MXU_CFG_STRING: {
        const char *s = *(const char *const *)p;
        snprintf(buf, len, "%s", s != NULL ? s : "");
        break;
    }
    case MXU_CFG_LOGLEVEL: {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        int level = *(const int *)p;
        snprintf(buf, len, "%s", level >= 0 && level <= 3 ? names[level] : "?");
        break;
    }
    }
}

/* Print `text` as comment lines "    # ..." wrapped at about 80 columns. */
static void print_wrapped(FILE *out, const char *text)
{
    const size_t width = 74;
    while (*text != '\0') {
        size_t n = strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0)
                n = width;
        }
        fprintf(out, "    # %.*s\n", (int)n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

void mxu_config_print(FILE *out, int with_help)
{
    if (out == NULL)
        return;
    for (int i = 0; i < NROWS; i++) {
        char value[256];
        mxu_config_value_string(i, value, sizeof(value));
        if (rows[i].from_env)
            fprintf(out, "%s=%s    # set in the environment\n", rows[i].name, value);
        else
            fprintf(out, "%s=%s\n", rows[i].name, value);
        if (with_help) {
            char help[1024];
            size_t hl = strlen(rows[i].help);
            int has_dot = hl > 0 && rows[i].help[hl - 1] == '.';
            char accepted[256];
            mxu_config_describe(i, accepted, sizeof(accepted));
            snprintf(help, sizeof(help), "%s%s [%s; default: %s]", rows[i].help, has_dot ? "" : ".",
                     accepted, rows[i].default_value);
            print_wrapped(out, help);
        }
    }
}
