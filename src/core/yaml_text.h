/* yaml_text.h - the YAML documents of a text (a file's contents), for the
 * parsers of mlwatch's YAML files (the configuration, rule files, the XID
 * catalog, the access policy).
 *
 * Errors are written into err as "NAME: cannot initialise the YAML parser"
 * and "NAME:LINE:COL: YAML syntax error: PROBLEM", NAME being the file's
 * name as the caller shows it. */
#ifndef MW_YAML_TEXT_H
#define MW_YAML_TEXT_H

#include <stddef.h>
#include <yaml.h>

/* Start parsing text[0, len) and load its first document into *doc.
 * 0: the caller owns *doc (yaml_document_delete) and *parser
 * (yaml_parser_delete); -1: error written, nothing to free. */
int mw_yaml_begin(yaml_parser_t *parser, yaml_document_t *doc, const char *name, const char *text,
                  size_t len, char *err, size_t errsize);
/* Load the parser's next document into *doc (one without a root node at
 * the end of the text). 0: the caller owns *doc; -1: syntax error written,
 * nothing to free but the parser. */
int mw_yaml_next(yaml_parser_t *parser, yaml_document_t *doc, const char *name, char *err,
                 size_t errsize);

#endif
