/* yaml_text.c - see yaml_text.h. */
#include "yaml_text.h"

#include <stdio.h>

int mw_yaml_next(yaml_parser_t *parser, yaml_document_t *doc, const char *name, char *err,
                 size_t errsize)
{
    if (yaml_parser_load(parser, doc)) return 0;
    snprintf(err, errsize, "%s:%zu:%zu: YAML syntax error: %s", name, parser->problem_mark.line + 1,
             parser->problem_mark.column + 1, parser->problem ? parser->problem : "unknown");
    return -1;
}

int mw_yaml_begin(yaml_parser_t *parser, yaml_document_t *doc, const char *name, const char *text,
                  size_t len, char *err, size_t errsize)
{
    if (!yaml_parser_initialize(parser)) {
        snprintf(err, errsize, "%s: cannot initialise the YAML parser", name);
        return -1;
    }
    yaml_parser_set_input_string(parser, (const unsigned char *)text, len);
    if (mw_yaml_next(parser, doc, name, err, errsize) == 0) return 0;
    yaml_parser_delete(parser);
    return -1;
}
