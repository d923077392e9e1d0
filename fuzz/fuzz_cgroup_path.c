/* fuzz_cgroup_path.c - cgroup path classification and the kubelet log name
 * parsers (pods.h) on arbitrary bytes. */
#include "collect/cgroup_path.h"
#include "collect/pods.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    mw_cg_node n;
    mw_cg_parse_path(s, &n);
    /* Each component alone, with its length (not NUL-terminated there). */
    mw_cg_node root;
    mw_cg_root(&root);
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && data[j] != '/')
            j++;
        char id[MW_CG_ID_MAX];
        mw_cg_classify(&root, s + i, j - i, &n);
        mw_cg_component_id(s + i, j - i, id);
        i = j + 1;
    }
    mw_pod_info p;
    mw_ctr_info c;
    mw_parse_pod_log_dir(s, &p);
    mw_parse_container_log_name(s, &c);
    (void)mw_cg_hash(s);
    free(s);
    return 0;
}
