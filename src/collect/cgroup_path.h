/* cgroup_path.h - what a cgroup's path says about what runs in it.
 *
 * Pure parsing, no I/O: the cgroup collector classifies each directory of
 * its walk from its name and its parent's classification (one component at
 * a time, so that the walk never re-parses a whole path), and the process
 * map resolves /proc/<pid>/cgroup lines with the same rules.
 *
 * Forms recognised (docs/containers.md has the full table), matched by
 * component wherever kubelet's kubepods group sits in the tree:
 *
 *   systemd driver (v1 and v2)
 *     /kubepods.slice/kubepods-pod<uid_>.slice/<ctr>.scope       guaranteed
 *     /kubepods.slice/kubepods-burstable.slice/
 *         kubepods-burstable-pod<uid_>.slice/<ctr>.scope           burstable
 *     /kubepods.slice/kubepods-besteffort.slice/
 *         kubepods-besteffort-pod<uid_>.slice/<ctr>.scope          besteffort
 *     <ctr> = cri-containerd-<id> | crio-<id> | docker-<id>; crio-conmon-<id>
 *     (CRI-O's monitor process) is not a container and is ignored.
 *     <uid_> is the pod UID with '-' written as '_' (systemd escaping).
 *   cgroupfs driver
 *     /kubepods/pod<uid>/<id>, /kubepods/burstable/pod<uid>/<id>,
 *     /kubepods/besteffort/pod<uid>/crio-<id>
 *   outside Kubernetes
 *     <name>.service anywhere outside kubepods           systemd service
 *     docker-<id>.scope, /docker/<id>                    Docker container
 *     .../slurmstepd.scope/job_<N> (v2), /slurm/uid_<U>/job_<N> (v1)
 *                                                         Slurm job
 *
 * <id> is a container ID: lower-case hex, 12 to 64 digits after a runtime
 * prefix, exactly 64 when the directory is the bare ID. */
#ifndef MW_CGROUP_PATH_H
#define MW_CGROUP_PATH_H

#include <stddef.h>
#include <stdint.h>

typedef enum mw_cg_kind {
    MW_CG_IGNORE = 0,    /* neither reported nor walked into */
    MW_CG_GROUP,         /* an intermediate group (slice, plain folder): walk into */
    MW_CG_KUBEPODS,      /* kubelet's top group: kubepods.slice or kubepods */
    MW_CG_K8S_QOS,       /* the burstable or besteffort group */
    MW_CG_K8S_POD,       /* one pod */
    MW_CG_K8S_CONTAINER, /* one container (or the sandbox) of a pod: reported */
    MW_CG_SERVICE,       /* a systemd service: reported */
    MW_CG_DOCKER_ROOT,   /* cgroupfs /docker */
    MW_CG_DOCKER,        /* a Docker container outside Kubernetes: reported */
    MW_CG_SLURM_ROOT,    /* slurmstepd.scope (v2) or /slurm (v1) */
    MW_CG_SLURM_UID,     /* v1 /slurm/uid_<U> */
    MW_CG_SLURM_JOB,     /* one Slurm job: reported */
} mw_cg_kind;

typedef enum { MW_QOS_NONE, MW_QOS_GUARANTEED, MW_QOS_BURSTABLE, MW_QOS_BESTEFFORT } mw_cg_qos;

typedef enum { MW_RT_NONE, MW_RT_CONTAINERD, MW_RT_CRIO, MW_RT_DOCKER } mw_cg_runtime;

#define MW_CG_UID_MAX 48 /* pod UID buffer: 36 characters (or 32 for static pods) */
#define MW_CG_ID_MAX 72  /* container ID buffer: 64 hex digits */

typedef struct mw_cg_node {
    mw_cg_kind kind;
    mw_cg_qos qos;               /* pods and their containers */
    mw_cg_runtime runtime;       /* containers; MW_RT_NONE when the name does not tell */
    char pod_uid[MW_CG_UID_MAX]; /* canonical form, with '-'; pods and containers */
    char id[MW_CG_ID_MAX];       /* container ID; containers and Docker */
} mw_cg_node;

/* 1 for the kinds that are reported (one sample set each). */
int mw_cg_reported(mw_cg_kind kind);
/* 1 for the kinds the walk descends into. */
int mw_cg_walked(mw_cg_kind kind);

/* The root of a hierarchy (kind MW_CG_GROUP). */
void mw_cg_root(mw_cg_node *out);

/* Classify NAME (one path component of LEN bytes, not NUL-terminated
 * necessarily) as a child of PARENT; fills *out and returns out->kind.
 * A child of a reported or ignored cgroup is always MW_CG_IGNORE. */
mw_cg_kind mw_cg_classify(const mw_cg_node *parent, const char *name, size_t len, mw_cg_node *out);

/* Classify a whole path relative to the hierarchy root ("/kubepods.slice/
 * ..."), component by component. Returns the kind of the last component
 * (MW_CG_IGNORE when a component on the way is not walked into; "/" is the
 * root, MW_CG_GROUP). Empty components ("//") are skipped. */
mw_cg_kind mw_cg_parse_path(const char *path, mw_cg_node *out);

/* The container ID that a single component names, whatever its parent
 * (cri-containerd-<id>.scope, crio-<id>[.scope], docker-<id>.scope or a bare
 * 64-hex ID); copies it into id (MW_CG_ID_MAX bytes) and returns 0, or -1.
 * Used to resolve paths seen from another cgroup namespace ("/../.."). */
int mw_cg_component_id(const char *name, size_t len, char *id);

/* From the text of /proc/<pid>/cgroup, the path the cgroup collector walks:
 * on cgroup v1 and hybrid hosts the line of the hierarchy holding cpuacct
 * (else cpu, else memory); on v2 hosts the "0::" line. Lines:
 *   "0::/kubepods.slice/...\n"            (v2)
 *   "4:cpu,cpuacct:/kubepods/pod.../...\n" (v1)
 * Copies the path (starting with '/') into out; returns 0, or -1 when
 * malformed, when no usable line exists, or when the path does not fit. */
int mw_parse_proc_cgroup(const char *text, char *out, size_t size);

/* A fast hash of a string (paths, IDs), for the tables of the container
 * modules. */
uint64_t mw_cg_hash(const char *s);

const char *mw_cg_qos_name(mw_cg_qos qos);        /* "guaranteed", ... or "" */
const char *mw_cg_runtime_name(mw_cg_runtime rt); /* "containerd", ... or "" */

#endif
