/* parse.h - small, strict text parsers shared by the collectors.
 *
 * They never read past a NUL, never allocate, and report malformed input as
 * -1 so the caller can count and log it. Fuzzed through the collectors'
 * parsers (fuzz/). */
#ifndef MW_PARSE_H
#define MW_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Parse an unsigned decimal at *p (no sign, no leading spaces); advances *p.
 * Returns 0, or -1 on no digits or overflow. */
int mw_parse_u64(const char **p, uint64_t *out);
/* Parse a signed decimal. */
int mw_parse_i64(const char **p, int64_t *out);
/* Parse a decimal floating-point number (strtod rules, locale-independent
 * for the C locale the agent runs in). */
int mw_parse_double(const char **p, double *out);
/* Skip spaces and tabs. */
void mw_skip_blanks(const char **p);
/* Advance *p past the next '\n' (or to the end). */
void mw_skip_line(const char **p);
/* The next line of the text at *p as [*start, *end): without its '\n' and
 * its leading spaces and tabs; *p moves past it. 0 at the end of the text. */
int mw_next_line(const char **p, const char **start, const char **end);
/* The next whole line of a /proc file at *p: *line its start, *nl its
 * '\n'; *p moves past it. 0 at the end of the text, and 0 with *cut
 * counted up for a last line without its newline (the read was cut
 * short: the line may be partial, so it is not parsed). */
int mw_next_whole_line(const char **p, const char **line, const char **nl, unsigned *cut);
/* The next token in [*q, e) separated by spaces and tabs: *start and its
 * length (0 at the end); *q moves past it. */
size_t mw_next_token(const char **q, const char *e, const char **start);

/* In a "key value\n" file (cpu.stat, memory.stat), find KEY at the start of a
 * line and parse its value. Returns 0, -1 when absent, -2 when malformed. */
int mw_kv_u64(const char *text, const char *key, uint64_t *out);

/* Parse a Linux CPU list ("0-3,8,10-11") into a bitmap of nbits bits.
 * Returns the number of CPUs set, or -1 when malformed or out of range. */
int mw_parse_cpulist(const char *s, uint64_t *bits, size_t nbits);

#endif
