// regex.cc - the C API of regex.h over RE2 (libre2): compile anchored
// patterns with Prometheus 3's flags, match them, and expand replacement
// templates as Go's regexp.Expand does. The only C++ in the tree; it throws
// nothing across the C boundary (RE2 reports errors through its status).
#include "regex.h"

#include <re2/re2.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

struct mw_regex {
    RE2 re;
    mw_regex(const char *pattern, const RE2::Options &opt) : re(pattern, opt) {}
};

namespace
{

void copy_message(const std::string &msg, char *err, size_t errsize)
{
    if (!err || errsize == 0) return;
    size_t n = msg.size() < errsize - 1 ? msg.size() : errsize - 1;
    for (size_t i = 0; i < n; i++) {
        char c = msg[i];
        // one line: a newline in the pattern is quoted back in the message
        err[i] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    err[n] = 0;
}

bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Appends to a bounded buffer while counting the whole length.
struct bounded_out {
    char *out;
    size_t size, n = 0;
    void put(const char *p, size_t len)
    {
        if (out && n + 1 < size) {
            size_t room = size - 1 - n;
            memcpy(out + n, p, len < room ? len : room);
        }
        n += len;
    }
    void finish()
    {
        if (out && size > 0) out[n < size ? n : size - 1] = 0;
    }
};

} // namespace

extern "C" {

mw_regex *mw_regex_compile(const char *pattern, char *err, size_t errsize)
{
    RE2::Options opt;
    opt.set_log_errors(false); // errors go to the caller, not to stderr
    opt.set_dot_nl(true);      // Prometheus 3: (?s:...), "." matches "\n"
    opt.set_max_mem(MW_REGEX_MAX_MEM);
    mw_regex *r = new (std::nothrow) mw_regex(pattern, opt);
    if (!r) {
        copy_message("out of memory compiling a regular expression", err, errsize);
        return NULL;
    }
    if (!r->re.ok()) {
        if (r->re.error_code() == RE2::ErrorPatternTooLarge)
            copy_message("pattern too large - compile failed: its program would need more than " +
                             std::to_string(MW_REGEX_MAX_MEM >> 20) + " MiB",
                         err, errsize);
        else
            copy_message(r->re.error(), err, errsize);
        delete r;
        return NULL;
    }
    return r;
}

void mw_regex_free(mw_regex *re)
{
    delete re;
}

int mw_regex_match(const mw_regex *re, const char *s)
{
    re2::StringPiece text(s);
    return re->re.Match(text, 0, text.size(), RE2::ANCHOR_BOTH, NULL, 0) ? 1 : 0;
}

size_t mw_regex_ngroups(const mw_regex *re)
{
    return (size_t)re->re.NumberOfCapturingGroups();
}

int mw_regex_capture(const mw_regex *re, const char *s, mw_regex_span *spans, size_t nspans)
{
    re2::StringPiece text(s);
    size_t want = mw_regex_ngroups(re) + 1;
    if (want > nspans) want = nspans;
    // most patterns have a few groups: no allocation for those
    re2::StringPiece few[16];
    std::vector<re2::StringPiece> many(want > 16 ? want : 0);
    re2::StringPiece *sub = want > 16 ? many.data() : few;
    bool ok = re->re.Match(text, 0, text.size(), RE2::ANCHOR_BOTH, sub, (int)want);
    for (size_t k = 0; k < nspans; k++) {
        if (ok && k < want && sub[k].data() != NULL) {
            spans[k].start = (long)(sub[k].data() - s);
            spans[k].end = spans[k].start + (long)sub[k].size();
        } else {
            spans[k].start = spans[k].end = -1;
        }
    }
    return ok ? 1 : 0;
}

size_t mw_regex_expand(const mw_regex *re, const char *tmpl, const char *s,
                       const mw_regex_span *spans, size_t nspans, char *out, size_t outsize)
{
    bounded_out o{out, outsize};
    const std::map<std::string, int> &names = re->re.NamedCapturingGroups();
    for (const char *p = tmpl; *p;) {
        const char *dollar = strchr(p, '$');
        if (!dollar) {
            o.put(p, strlen(p));
            break;
        }
        o.put(p, (size_t)(dollar - p));
        p = dollar;
        if (p[1] == '$') {
            o.put("$", 1);
            p += 2;
            continue;
        }
        const char *name = p + 1;
        bool braced = *name == '{';
        if (braced) name++;
        const char *end = name;
        while (is_name_char(*end))
            end++;
        if (end == name || (braced && *end != '}')) {
            o.put("$", 1); // not a reference: the "$" stays, the rest is text
            p++;
            continue;
        }
        // A name of digits only is a group number (Go gives up past 1e8).
        long num = 0;
        for (const char *q = name; q < end && num >= 0; q++)
            num = (*q >= '0' && *q <= '9' && num < 100000000) ? num * 10 + (*q - '0') : -1;
        if (num < 0) {
            auto it = names.find(std::string(name, (size_t)(end - name)));
            if (it != names.end()) num = it->second;
        }
        if (num >= 0 && (size_t)num < nspans && spans[num].start >= 0)
            o.put(s + spans[num].start, (size_t)(spans[num].end - spans[num].start));
        p = braced ? end + 1 : end;
    }
    o.finish();
    return o.n;
}

} // extern "C"
