// validate.mjs - schema check of Kubernetes objects with kubernetes-models
// (the API's OpenAPI schemas compiled to validators) and
// @kubernetes-models/prometheus-operator (the operator's CRD schemas).
// Reads a JSON array of objects on stdin (tests/integration/deploy_manifests.sh
// converts the YAML), prints one line per object, exits 1 when any object is
// invalid or of a kind this script has no schema for (an unknown kind is a
// typo until proven otherwise).
import { readFileSync } from "node:fs";

const objs = JSON.parse(readFileSync(0, "utf8"));

function modulePath(apiVersion, kind) {
    if (!/^[A-Za-z0-9.\/-]+$/.test(apiVersion) || !/^[A-Za-z0-9]+$/.test(kind)) return null;
    if (apiVersion.startsWith("monitoring.coreos.com/"))
        return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
    return `kubernetes-models/${apiVersion}/${kind}`;
}

let bad = 0;
for (const o of objs) {
    const where = `${o.kind}/${o.metadata && o.metadata.name} (${o.apiVersion})`;
    const path = modulePath(String(o.apiVersion), String(o.kind));
    let mod;
    try {
        if (!path) throw new Error("malformed apiVersion or kind");
        mod = await import(path);
    } catch (e) {
        console.log(`INVALID ${where}: no schema for this kind (${e.message.split("\n")[0]})`);
        bad++;
        continue;
    }
    const Model = mod[o.kind];
    try {
        new Model(o).validate();
        console.log(`valid ${where}`);
    } catch (e) {
        console.log(`INVALID ${where}: ${e.message}`);
        bad++;
    }
}
if (objs.length === 0) {
    console.log("INVALID: no objects");
    bad++;
}
process.exit(bad ? 1 : 0);
