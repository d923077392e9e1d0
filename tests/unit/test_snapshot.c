/* test_snapshot.c - one cycle's samples (src/core/snapshot.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/snapshot.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mw_metric_desc CPU = {"mlwatch_cpu_seconds_total", "CPU", "seconds", MW_COUNTER};
static const mw_metric_desc MEM = {"mlwatch_memory_bytes", "Memory", "bytes", MW_GAUGE};
static const mw_metric_desc OTHER = {"mlwatch_other", "Other", "", MW_GAUGE};
/* A second description of the same name (two collectors sharing a family). */
static const mw_metric_desc CPU_AGAIN = {"mlwatch_cpu_seconds_total", "other", "", MW_GAUGE};

static void emit_and_find(void **state)
{
    (void)state;
    int64_t before = mw_now_ms();
    mw_snapshot *s = mw_snapshot_new();
    assert_true(s->timestamp_ms >= before && s->timestamp_ms <= mw_now_ms());
    assert_null(mw_snapshot_find(s, "mlwatch_cpu_seconds_total"));

    char cpu[8];
    snprintf(cpu, sizeof(cpu), "0");
    mw_emit(s, &CPU, 1.5, "cpu", cpu, "mode", "user", MW_END);
    snprintf(cpu, sizeof(cpu), "1"); /* the snapshot keeps its own copy */
    mw_emit(s, &MEM, 4096, MW_END);
    mw_emit(s, &CPU, 2.5, "cpu", cpu, "mode", (const char *)NULL, MW_END); /* NULL value: "" */
    mw_emit(s, &CPU_AGAIN, 9, "cpu", "2", MW_END);

    assert_int_equal(s->nfamilies, 2);
    assert_int_equal(s->nsamples, 4);
    /* Families in order of first emission; samples in order of emission. */
    assert_ptr_equal(s->first->desc, &CPU);
    assert_ptr_equal(s->first->next->desc, &MEM);
    assert_null(s->first->next->next);
    assert_ptr_equal(s->last, s->first->next);

    const mw_family *f = mw_snapshot_find(s, "mlwatch_cpu_seconds_total");
    assert_ptr_equal(f, s->first);
    assert_int_equal(f->nsamples, 3);
    const mw_sample *a = f->first, *b = a->next, *c = b->next;
    assert_null(c->next);
    assert_ptr_equal(f->last, c);
    assert_true(a->value == 1.5 && b->value == 2.5 && c->value == 9);
    assert_int_equal(a->nlabels, 2);
    assert_string_equal(a->labels[0].name, "cpu");
    assert_string_equal(a->labels[0].value, "0");
    assert_string_equal(a->labels[1].value, "user");
    assert_string_equal(b->labels[0].value, "1");
    assert_string_equal(b->labels[1].name, "mode");
    assert_string_equal(b->labels[1].value, "");
    assert_int_equal(c->nlabels, 1);

    const mw_family *m = mw_snapshot_find(s, "mlwatch_memory_bytes");
    assert_int_equal(m->nsamples, 1);
    assert_int_equal(m->first->nlabels, 0);
    assert_null(mw_snapshot_find(s, "mlwatch_memory"));
    assert_null(mw_snapshot_find(s, ""));
    mw_snapshot_free(s);
    mw_snapshot_free(NULL);
}

static void get_by_labels(void **state)
{
    (void)state;
    mw_snapshot *s = mw_snapshot_new();
    mw_emit(s, &CPU, 1, "cpu", "0", "mode", "user", MW_END);
    mw_emit(s, &CPU, 2, "cpu", "0", "mode", "system", MW_END);
    mw_emit(s, &CPU, 3, "cpu", "1", "mode", "user", MW_END);
    mw_emit(s, &MEM, 10, MW_END);
    mw_emit(s, &MEM, 20, "numa", "", MW_END);
    double v = -1;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &v, "cpu", "1", MW_END), 0);
    assert_true(v == 3);
    assert_int_equal(
        mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &v, "mode", "system", "cpu", "0", MW_END),
        0);
    assert_true(v == 2);
    /* No label filter: the first sample. */
    assert_int_equal(mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &v, MW_END), 0);
    assert_true(v == 1);
    /* An absent label equals the empty value, as in PromQL. */
    assert_int_equal(mw_snapshot_get(s, "mlwatch_memory_bytes", &v, "numa", "", MW_END), 0);
    assert_true(v == 10);
    v = -1;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &v, "cpu", "2", MW_END), -1);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &v, "node", "0", MW_END), -1);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_nothing", &v, MW_END), -1);
    assert_true(v == -1);
    mw_snapshot_free(s);
}

static void label_limit(void **state)
{
    (void)state;
    mw_snapshot *s = mw_snapshot_new();
    mw_label labels[20];
    char names[20][8], values[20][8];
    for (int i = 0; i < 20; i++) {
        snprintf(names[i], sizeof(names[i]), "l%d", i);
        snprintf(values[i], sizeof(values[i]), "v%d", i);
        labels[i].name = names[i];
        labels[i].value = values[i];
    }
    mw_emitv(s, &MEM, 1, 20, labels);
    const mw_sample *smp = mw_snapshot_find(s, "mlwatch_memory_bytes")->first;
    assert_int_equal(smp->nlabels, MW_MAX_LABELS);
    assert_string_equal(smp->labels[15].value, "v15");
    /* Through mw_emit as well: extra pairs are dropped, not overrun. */
    mw_emit(s, &MEM, 2, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6", "g", "7", "h",
            "8", "i", "9", "j", "10", "k", "11", "l", "12", "m", "13", "n", "14", "o", "15", "p",
            "16", "q", "17", MW_END);
    smp = smp->next;
    assert_int_equal(smp->nlabels, MW_MAX_LABELS);
    assert_string_equal(smp->labels[15].name, "p");
    assert_string_equal(smp->labels[15].value, "16");
    mw_emitv(s, &MEM, 3, 0, NULL);
    assert_int_equal(smp->next->nlabels, 0);
    mw_snapshot_free(s);
}

static void many_families(void **state)
{
    (void)state;
    /* Far more families than the initial index: it must grow and still find
     * every one, in emission order. */
    enum { N = 5000 };
    mw_metric_desc *d = mw_xcalloc(N, sizeof(*d));
    char(*names)[32] = mw_xcalloc(N, 32);
    mw_snapshot *s = mw_snapshot_new();
    for (int i = 0; i < N; i++) {
        snprintf(names[i], 32, "mlwatch_family_%d", i);
        d[i] = (mw_metric_desc){names[i], "help", "", MW_GAUGE};
        mw_emit(s, &d[i], i, MW_END);
        mw_emit(s, &d[i / 2], -i, "again", "yes", MW_END); /* re-emitting an older family */
    }
    assert_int_equal(s->nfamilies, N);
    assert_int_equal(s->nsamples, 2 * N);
    assert_true(s->nslots >= 2 * N);
    int i = 0;
    for (const mw_family *f = s->first; f; f = f->next, i++) {
        assert_ptr_equal(f->desc, &d[i]);
        assert_ptr_equal(mw_snapshot_find(s, names[i]), f);
        assert_true(f->first->value == i);
    }
    assert_int_equal(i, N);
    double v;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_family_1234", &v, "again", "yes", MW_END), 0);
    assert_true(v == -2468);
    mw_snapshot_free(s);
    free(names);
    free(d);
}

static void large_label_values(void **state)
{
    (void)state;
    /* Values larger than an arena block are copied whole. */
    size_t n = 200000;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 26);
    big[n] = '\0';
    mw_snapshot *s = mw_snapshot_new();
    mw_emit(s, &MEM, 1, "big", big, MW_END);
    mw_emit(s, &MEM, 2, "small", "x", MW_END);
    big[0] = 'Z';
    const mw_sample *smp = mw_snapshot_find(s, "mlwatch_memory_bytes")->first;
    assert_int_equal(strlen(smp->labels[0].value), n);
    assert_int_equal(smp->labels[0].value[0], 'a');
    assert_string_equal(smp->next->labels[0].value, "x");
    free(big);
    mw_snapshot_free(s);
}

static void label_values_stored_once(void **state)
{
    (void)state;
    /* A value that recurs (a container ID on every family of the container)
     * is one copy in the snapshot, whatever buffer the collector passed. */
    mw_snapshot *s = mw_snapshot_new();
    char id[80];
    for (int i = 0; i < 3000; i++) {
        snprintf(id, sizeof(id), "%064d", i % 300);
        mw_emit(s, i % 2 ? &MEM : &OTHER, i, "container_id", id, "empty", (const char *)NULL,
                MW_END);
    }
    snprintf(id, sizeof(id), "changed");
    const mw_family *a = mw_snapshot_find(s, "mlwatch_memory_bytes");
    const mw_family *b = mw_snapshot_find(s, "mlwatch_other");
    assert_int_equal(a->nsamples + b->nsamples, 3000);
    /* sample 1 (MEM, i=1) and sample 301 (MEM, i=301) have the same ID */
    const mw_sample *m1 = a->first, *m301 = a->first;
    for (int k = 0; k < 150; k++)
        m301 = m301->next;
    assert_true(m1->value == 1 && m301->value == 301);
    assert_string_equal(m1->labels[0].value,
                        "0000000000000000000000000000000000000000000000000000000000000001");
    assert_ptr_equal(m1->labels[0].value, m301->labels[0].value);
    assert_string_equal(m1->labels[1].value, "");
    /* Sealed: the index is gone, emitting still works and still copies. */
    size_t used = s->arena.used_bytes;
    mw_snapshot_seal(s);
    assert_null(s->interned);
    mw_emit(s, &MEM, 7, "container_id", "late", MW_END);
    assert_true(s->arena.used_bytes > used);
    double v;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_memory_bytes", &v, "container_id", "late", MW_END),
                     0);
    assert_true(v == 7);
    /* The arena holds the samples and their label sets (each sample's labels
     * differ from the previous one's: no set is shared), 2 families, and 301
     * values (300 IDs of 64 characters and ""), each rounded up to 16 bytes:
     * no copy of a value per sample. */
#define R16(n) (((n) + 15) / 16 * 16)
    assert_int_equal(used, 3000 * (R16(sizeof(mw_sample)) + R16(2 * sizeof(mw_label))) +
                               300 * R16(65) + R16(1) + 2 * R16(sizeof(mw_family)));
    mw_snapshot_free(s);
}

/* A collector that keeps one label array per container and emits it once
 * per family (the cgroup collector) gets one label set per container: each
 * sample shares the set of the previous sample from the same array when the
 * labels (names and values, in order) are the same. Anything else gets its
 * own copy; a copy never changes. */
static void label_sets_shared(void **state)
{
    (void)state;
    mw_snapshot *s = mw_snapshot_new();
    char pods[3][8] = {"a", "b", "c"};
    mw_label ctr[3][2];
    for (int c = 0; c < 3; c++) {
        ctr[c][0] = (mw_label){"namespace", "ml"};
        ctr[c][1] = (mw_label){"pod", pods[c]};
    }
    const mw_metric_desc *fams[3] = {&CPU, &MEM, &OTHER};
    for (int f = 0; f < 3; f++)
        for (int c = 0; c < 3; c++)
            mw_emitv(s, fams[f], 10 * f + c, 2, ctr[c]);
    assert_int_equal(s->nsamples, 9);
    assert_int_equal(s->nsets, 3);
    for (int f = 0; f < 3; f++) {
        const mw_sample *x = mw_snapshot_find(s, fams[f]->name)->first;
        for (int c = 0; c < 3; c++, x = x->next)
            assert_true(x->value == 10 * f + c);
    }
    const mw_sample *a = mw_snapshot_find(s, "mlwatch_cpu_seconds_total")->first;
    const mw_sample *b = a->next, *c3 = b->next;
    const mw_sample *ma = mw_snapshot_find(s, "mlwatch_memory_bytes")->first;
    const mw_sample *oa = mw_snapshot_find(s, "mlwatch_other")->first;
    assert_ptr_equal(ma->labels, a->labels);
    assert_ptr_equal(oa->labels, a->labels);
    assert_ptr_equal(ma->next->labels, b->labels);
    assert_ptr_equal(oa->next->next->labels, c3->labels);
    assert_ptr_not_equal(a->labels, b->labels);
    assert_string_equal(b->labels[1].value, "b");

    /* The caller's array changed: a new set; the old samples keep theirs. */
    snprintf(pods[0], sizeof(pods[0]), "z");
    mw_emitv(s, &CPU, 100, 2, ctr[0]);
    const mw_sample *z = c3->next;
    assert_ptr_not_equal(z->labels, a->labels);
    assert_string_equal(z->labels[1].value, "z");
    assert_string_equal(a->labels[1].value, "a");
    /* The same labels in another order, or from another array: copies. */
    mw_label swapped[2] = {ctr[1][1], ctr[1][0]};
    mw_label same_b[2] = {ctr[1][0], ctr[1][1]};
    mw_emitv(s, &CPU, 101, 2, swapped);
    mw_emitv(s, &CPU, 102, 2, same_b);
    assert_ptr_not_equal(z->next->labels, b->labels);
    assert_string_equal(z->next->labels[0].name, "pod");
    assert_ptr_not_equal(z->next->next->labels, b->labels);
    assert_string_equal(z->next->next->labels[1].value, "b");
    assert_int_equal(s->nsets, 6);
    mw_emitv(s, &OTHER, 7, 0, NULL);
    assert_int_equal(oa->next->next->next->nlabels, 0);
    /* Sealed: the index is gone; emitting still works. */
    mw_snapshot_seal(s);
    assert_null(s->sets);
    mw_emitv(s, &CPU, 103, 2, ctr[2]);
    double got;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_cpu_seconds_total", &got, "pod", "z", MW_END), 0);
    assert_true(got == 100);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_memory_bytes", &got, "pod", "c", MW_END), 0);
    assert_true(got == 12);
    mw_snapshot_free(s);
}

/* The index of label values is sized from the last sealed snapshot: a
 * cycle like the last one never grows it (growing holds two at once). */
static void value_index_sized_from_last(void **state)
{
    (void)state;
    char id[32];
    mw_snapshot *a = mw_snapshot_new();
    for (int i = 0; i < 3000; i++) {
        snprintf(id, sizeof(id), "a-%d", i);
        mw_emit(a, &MEM, i, "container_id", id, MW_END);
    }
    assert_int_equal(a->ninterned, 3000);
    assert_int_equal(a->ninterned_slots, 8192); /* grown: 1024, 2048, 4096, 8192 */
    mw_snapshot_seal(a);
    mw_snapshot *b = mw_snapshot_new();
    mw_emit(b, &MEM, 0, "container_id", "b-0", MW_END);
    assert_int_equal(b->ninterned_slots, 8192); /* at once: 2 x 3001 rounded up */
    for (int i = 1; i < 3000; i++) {
        snprintf(id, sizeof(id), "b-%d", i);
        mw_emit(b, &MEM, i, "container_id", id, MW_END);
    }
    assert_int_equal(b->ninterned_slots, 8192);
    /* Values are still found, not stored twice. */
    size_t used = b->arena.used_bytes;
    mw_emit(b, &OTHER, 1, "container_id", "b-2999", MW_END);
    const mw_family *o = mw_snapshot_find(b, "mlwatch_other");
    const mw_family *m = mw_snapshot_find(b, "mlwatch_memory_bytes");
    assert_ptr_equal(o->first->labels[0].value, m->last->labels[0].value);
    /* the family and the sample: neither a copy of the value nor of the
     * label set (the same as the previous sample's) */
    assert_int_equal(b->arena.used_bytes - used, R16(sizeof(mw_family)) + R16(sizeof(mw_sample)));
    mw_snapshot_seal(b);
    /* A small cycle makes the next index small again. */
    mw_snapshot *c = mw_snapshot_new();
    mw_emit(c, &MEM, 0, "container_id", "c", MW_END);
    mw_snapshot_seal(c);
    mw_snapshot *d = mw_snapshot_new();
    mw_emit(d, &MEM, 0, "container_id", "d", MW_END);
    assert_int_equal(d->ninterned_slots, 1024);
    mw_snapshot_free(a);
    mw_snapshot_free(b);
    mw_snapshot_free(c);
    mw_snapshot_free(d);
}

/* The node's name on every sample: appended last, a sample that has the
 * label keeps its value, samples sharing a label set still share one, and
 * a sample without labels gets just the one. */
static void label_all_adds_node(void **st)
{
    (void)st;
    mw_snapshot *s = mw_snapshot_new();
    mw_emit(s, &CPU, 1, "cpu", "0", "mode", "user", MW_END);
    mw_emit(s, &CPU, 2, "cpu", "0", "mode", "user", MW_END);
    mw_emit(s, &MEM, 3, MW_END);
    mw_emit(s, &OTHER, 4, "node", "mine", MW_END);
    char name[8] = "n1";
    mw_snapshot_label_all(s, "node", name);
    name[0] = 'x'; /* the value was copied */
    const mw_family *f = mw_snapshot_find(s, "mlwatch_cpu_seconds_total");
    const mw_sample *a = f->first, *b = a->next;
    assert_int_equal(a->nlabels, 3);
    assert_string_equal(a->labels[2].name, "node");
    assert_string_equal(a->labels[2].value, "n1");
    assert_string_equal(a->labels[0].value, "0");
    assert_string_equal(a->labels[1].value, "user");
    assert_ptr_equal(a->labels, b->labels);
    const mw_sample *m = mw_snapshot_find(s, "mlwatch_memory_bytes")->first;
    assert_int_equal(m->nlabels, 1);
    assert_string_equal(m->labels[0].value, "n1");
    const mw_sample *o = mw_snapshot_find(s, "mlwatch_other")->first;
    assert_int_equal(o->nlabels, 1);
    assert_string_equal(o->labels[0].value, "mine");
    mw_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(label_values_stored_once),
        cmocka_unit_test(emit_and_find),
        cmocka_unit_test(get_by_labels),
        cmocka_unit_test(label_limit),
        cmocka_unit_test(many_families),
        cmocka_unit_test(large_label_values),
        cmocka_unit_test(label_sets_shared),
        cmocka_unit_test(label_all_adds_node),
        cmocka_unit_test(value_index_sized_from_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
