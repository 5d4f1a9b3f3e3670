/*
 * mpixacc_settings_doc.c - the documentation of the MPIX_ACC_* settings,
 * printed from the registry (MXU_CONFIG_TABLE, src/util/settings.h), so the
 * README and mpix_acc(3) have one source. Not installed; used by
 * scripts/settings-doc.sh (--check in the test suite, --update to rewrite).
 *
 *   mpixacc_settings_doc --markdown   the README's settings table
 *   mpixacc_settings_doc --man        one `.BR NAME " (TYPE, default " "DEF" )`
 *                                     line per setting: the entry headers of
 *                                     mpix_acc(3)'s ENVIRONMENT section (the
 *                                     page's text under each is prose of its own)
 */
#include <stdio.h>
#include <string.h>

#include "util/settings.h"

/* Markdown: identifiers in backquotes (MPIX_ACC_*, MPIX_Acc_*, MPI_*,
 * mpix_acc_* hints, UCX_*); "|" escaped. */
static int ident_start(const char *p)
{
    static const char *const prefixes[] = {"MPIX_ACC_", "MPIX_Acc_", "MPI_", "mpix_acc_", "UCX_"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(p, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static int ident_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '*';
}

static void md_text(const char *s)
{
    for (const char *p = s; *p;) {
        int at_word = p == s || !ident_char(p[-1]);
        if (at_word && ident_start(p)) {
            const char *e = p;
            while (ident_char(*e))
                e++;
            printf("`%.*s`", (int)(e - p), p);
            p = e;
            continue;
        }
        if (*p == '|')
            fputs("\\|", stdout);
        else
            putchar(*p);
        p++;
    }
}

/* the range "lo..hi" or the words "w1|w2" with each piece in `open`/`close` */
static void pieces(const char *range, const char *open, const char *close, const char *sep)
{
    const char *p = range;
    while (*p) {
        size_t n = strcspn(p, "|");
        printf("%s%.*s%s", open, (int)n, p, close);
        p += n;
        if (*p == '|') {
            fputs(sep, stdout);
            p++;
        }
    }
}

static void md_type(const mxu_config_entry_t *e)
{
    switch (e->type) {
    case MXU_CFG_BOOL:
        fputs("bool", stdout);
        break;
    case MXU_CFG_LOGLEVEL:
        fputs("log level: `error`, `warn`, `info`, `debug`", stdout);
        break;
    case MXU_CFG_INT:
        printf("integer `%s`", e->range);
        break;
    case MXU_CFG_DOUBLE:
        printf("number `%s`", e->range);
        break;
    case MXU_CFG_SIZE:
        printf("size `%s` (bytes, k/m/g suffixes)", e->range);
        break;
    case MXU_CFG_STRING:
        fputs("one of ", stdout);
        pieces(e->range, "`", "`", ", ");
        break;
    }
}

/* roff: '-' as \- (a minus, not a hyphen), backslashes doubled */
static void roff_text(const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '-')
            fputs("\\-", stdout);
        else if (*p == '\\')
            fputs("\\\\", stdout);
        else
            putchar(*p);
    }
}

static void man_type(const mxu_config_entry_t *e)
{
    switch (e->type) {
    case MXU_CFG_BOOL:
        fputs("bool", stdout);
        break;
    case MXU_CFG_LOGLEVEL:
        fputs("log level: error, warn, info, debug", stdout);
        break;
    case MXU_CFG_INT:
        fputs("integer ", stdout);
        roff_text(e->range);
        break;
    case MXU_CFG_DOUBLE:
        fputs("number ", stdout);
        roff_text(e->range);
        break;
    case MXU_CFG_SIZE:
        fputs("size ", stdout);
        roff_text(e->range);
        fputs(" in bytes, k/m/g suffixes", stdout);
        break;
    case MXU_CFG_STRING: {
        /* "a or b", "a, b or c" */
        const char *last = strrchr(e->range, '|');
        if (last == NULL) {
            fputs(e->range, stdout);
            break;
        }
        for (const char *p = e->range; p < last; p++)
            fputs(*p == '|' ? ", " : (char[]){*p, 0}, stdout);
        printf(" or %s", last + 1);
        break;
    }
    }
}

int main(int argc, char **argv)
{
    int man = argc == 2 && strcmp(argv[1], "--man") == 0;
    if (argc != 2 || (!man && strcmp(argv[1], "--markdown") != 0)) {
        fprintf(stderr, "usage: %s --markdown | --man\n", argv[0]);
        return 2;
    }
    if (!man)
        puts("| variable | type | default | meaning |\n|---|---|---|---|");
    for (int i = 0; i < mxu_config_count(); i++) {
        const mxu_config_entry_t *e = mxu_config_entry(i);
        if (man) {
            printf(".BR %s \" (", e->name);
            man_type(e);
            /* "; default" after a list with commas, else ", default" */
            fputs(e->type == MXU_CFG_LOGLEVEL ? "; default \" \"" : ", default \" \"", stdout);
            roff_text(e->default_value);
            puts("\" )");
        } else {
            printf("| `%s` | ", e->name);
            md_type(e);
            printf(" | `%s` | ", e->default_value);
            md_text(e->help);
            puts(" |");
        }
    }
    return 0;
}
