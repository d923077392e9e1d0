/* osinfo.h - parser for os-release(5) (exposed for tests and fuzzing). */
#ifndef MW_OSINFO_H
#define MW_OSINFO_H

typedef struct mw_os_release {
    char name[128], id[64], version_id[64], pretty_name[256];
} mw_os_release;

/* Parse os-release: "KEY=value" lines, the value bare, in double quotes
 * (with \" \\ \$ \` escapes) or in single quotes; '#' comments and blank
 * lines ignored. NAME, ID, VERSION_ID and PRETTY_NAME fill *out (missing
 * ones are ""; long ones cut). Returns the number of malformed lines (no
 * '=', a key that is not [A-Z0-9_], an unterminated quote, text after the
 * closing quote). */
int mw_parse_os_release(const char *text, mw_os_release *out);

#endif
