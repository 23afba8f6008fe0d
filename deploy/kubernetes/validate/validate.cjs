#!/usr/bin/env node
// Offline validation of Kubernetes manifests (scripts/check-k8s-manifests.sh runs it).
//
// Every object is checked three ways, with no cluster and no network:
//   1. against the JSON schema of its kind from Kubernetes' own OpenAPI document, as the
//      kubernetes-models package compiles it (types, enums, required fields, formats);
//   2. for field names: the OpenAPI document does not forbid unknown fields (the API server
//      drops or refuses them depending on its field validation), so each object is also typed
//      as its kind's TypeScript declaration from the same package, and every object key the
//      declaration does not have is reported with its path. A misspelt `hostNetwrok: true`
//      would otherwise pass every schema and be silently ignored by the cluster;
//   3. across the objects of one installation (--bundle): what the API server or the kubelet
//      would only notice later: selectors that match no pod template, volume mounts without a
//      volume, named ports that no container declares, ConfigMaps that are not in the bundle.
// YAML is read as Kubernetes reads it (YAML 1.1: `yes` is a boolean, `0440` an octal number;
// duplicate keys are errors).
//
// Usage:
//   node validate.cjs [--bundle FILE]... [--bundle-of DIR]... [--file FILE]... [--broken FILE]...
//                     [--kustomization DIR]... [--extract-to DIR]
//   --bundle FILE     one installation (e.g. `kubectl kustomize` output): all three checks
//   --as NAME         shows the input before it as NAME (a rendered bundle's temporary file)
//   --file FILE       objects checked on their own (1 and 2)
//   --broken FILE     a negative control: it must FAIL, and the output must contain every
//                     `# expect: TEXT` line of the file, so a check that stopped working (or
//                     that fails for another reason) is noticed
//   --bundle-of DIR   the files DIR/kustomization.yaml lists under `resources`, as one bundle,
//                     unrendered (where no kubectl is at hand to run `kubectl kustomize`)
//   --kustomization DIR  kustomization.yaml of DIR: known keys only, every listed file exists,
//                     and every manifest in DIR is listed (a forgotten file is never applied)
//   --extract-to DIR  from the first bundle, for the checks that need airlock and HAProxy:
//                     DIR/policy.toml (ConfigMap airlock-policy), DIR/nodes.txt (ConfigMap
//                     airlock-fleet-nodes) and DIR/generate-config.args, the arguments of the
//                     proxy's generate-config initContainer, each ended by a NUL byte
// Exit status 0 when every input passed (and every --broken input failed as expected), else 1.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const ts = require("typescript");

const here = __dirname;

// ---- reading ---------------------------------------------------------------------------------

function readDocs(file) {
  const text = fs.readFileSync(file, "utf8");
  const docs = YAML.parseAllDocuments(text, { version: "1.1", uniqueKeys: true, prettyErrors: true });
  const out = [];
  const problems = [];
  docs.forEach((d, i) => {
    for (const e of d.errors) problems.push(`document ${i + 1}: YAML: ${e.message.split("\n")[0].replace(/:$/, "")}`);
    if (d.errors.length) return;
    const value = d.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return; // an empty document (comments only)
    out.push({ index: i + 1, value });
  });
  return { docs: out, problems };
}

// ---- 1. the schema of the kind -----------------------------------------------------------------

function modelModule(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (!/^[a-z0-9.]*$/.test(group) || !/^v[0-9a-z]+$/.test(version) || !/^[A-Za-z]+$/.test(kind))
    return null;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

function resolveModel(apiVersion, kind) {
  const mod = modelModule(apiVersion, kind);
  if (!mod) return null;
  try {
    return { mod, file: require.resolve(mod, { paths: [here] }) };
  } catch {
    return null;
  }
}

// "data/spec/template/spec/containers/0/ports/0/containerPort must be integer" -> JSON path form.
function schemaErrors(doc, model) {
  const Model = require(model.file)[doc.kind];
  if (typeof Model !== "function") return [`no model class ${doc.kind} in ${model.mod}`];
  try {
    new Model(doc).validate();
    return [];
  } catch (e) {
    const errs = Array.isArray(e.errors) && e.errors.length ? e.errors : null;
    if (errs) {
      return errs.map((x) => {
        let where = jsonPointerToPath(x.instancePath || "");
        let msg = x.message || x.keyword;
        if (x.keyword === "enum" && x.params && x.params.allowedValues)
          msg += ": " + x.params.allowedValues.map((v) => JSON.stringify(v)).join(", ");
        if (x.keyword === "required" && x.params && x.params.missingProperty)
          where = joinPath(where, x.params.missingProperty);
        return `${where || "(object)"}: ${msg}`;
      });
    }
    return [String(e.message || e).replace(/data\/([^ ]*)/g, (_, p) => jsonPointerToPath("/" + p))];
  }
}

function jsonPointerToPath(ptr) {
  let out = "";
  for (const raw of ptr.split("/").slice(1)) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    out = /^[0-9]+$/.test(part) ? `${out}[${part}]` : joinPath(out, part);
  }
  return out;
}

function joinPath(base, key) {
  const k = /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? key : JSON.stringify(key);
  return base ? `${base}.${k}` : k;
}

// ---- 2. field names, through the TypeScript declarations --------------------------------------

// All documents of all inputs go into one TypeScript program (one compiler start, ~1-2 s). Each
// is a virtual file inside this directory, so `kubernetes-models/...` resolves from
// node_modules here; nothing is written to disk.
function fieldNameErrors(entries) {
  const sources = new Map();
  entries.forEach((entry, n) => {
    const name = path.join(here, "__manifests__", `doc${n}.ts`);
    entry.tsFile = name;
    const iface = `I${entry.doc.kind}`;
    sources.set(
      name,
      `import type { ${iface} as T } from ${JSON.stringify(entry.model.mod)};\n` +
        `export const doc: T = ${JSON.stringify(entry.doc, null, 1)};\n`,
    );
  });
  const options = {
    noEmit: true,
    strict: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2020,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    types: [],
  };
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile;
  host.getSourceFile = (fileName, lang, onError, create) =>
    sources.has(fileName)
      ? ts.createSourceFile(fileName, sources.get(fileName), lang, true)
      : getSourceFile.call(host, fileName, lang, onError, create);
  const fileExists = host.fileExists;
  host.fileExists = (f) => sources.has(f) || fileExists.call(host, f);
  const readFile = host.readFile;
  host.readFile = (f) => (sources.has(f) ? sources.get(f) : readFile.call(host, f));
  const program = ts.createProgram([...sources.keys()], options, host);
  const checker = program.getTypeChecker();

  for (const entry of entries) {
    const sf = program.getSourceFile(entry.tsFile);
    const found = [];
    // The declaration itself must have resolved, or every field would look unknown (or none).
    for (const d of program.getSemanticDiagnostics(sf)) {
      const text = ts.flattenDiagnosticMessageText(d.messageText, " ");
      if (d.code === 2305 || d.code === 2307 || d.code === 2724) {
        found.push(`no TypeScript declaration for ${entry.doc.apiVersion} ${entry.doc.kind}: ${text}`);
      } else if (d.code !== 2353 && d.code !== 2561 && !entry.schemaErrors.length) {
        // A type error the schema check did not see (it reports the same ones first).
        found.push(`${pathOfNode(nodeAt(sf, d.start)) || "(object)"}: ${text}`);
      }
    }
    const decl = sf.statements.find(ts.isVariableStatement);
    const init = decl && decl.declarationList.declarations[0].initializer;
    // A root without a declared type would make every field pass: that is an error too.
    if (!init || !declaredProperties(init, checker))
      found.push(`no TypeScript type for ${entry.doc.apiVersion} ${entry.doc.kind}: its field names were not checked`);
    else walkLiteral(init, "", checker, found);
    entry.fieldErrors = [...new Set(found)];
  }
}

function nodeAt(sf, pos) {
  let best = sf;
  const visit = (n) => {
    if (pos >= n.getStart(sf) && pos < n.getEnd()) {
      best = n;
      ts.forEachChild(n, visit);
    }
  };
  ts.forEachChild(sf, visit);
  return best;
}

function pathOfNode(node) {
  const parts = [];
  for (let n = node; n && n.parent; ) {
    const p = n.parent;
    if (ts.isPropertyAssignment(p)) {
      parts.unshift({ key: p.name.text });
      n = p.parent; // the object literal holding it
    } else if (ts.isArrayLiteralExpression(p)) {
      parts.unshift({ index: p.elements.indexOf(n) });
      n = p;
    } else {
      n = p;
    }
  }
  let out = "";
  for (const p of parts) out = p.key !== undefined ? joinPath(out, p.key) : `${out}[${p.index}]`;
  return out;
}

// The declared type of an object literal, null where anything goes (an index signature such as
// labels' {[key: string]: string}, `any`, or no contextual type at all).
function declaredProperties(node, checker) {
  const ctx = checker.getContextualType(node);
  if (!ctx) return null;
  const members = ctx.isUnion() ? ctx.types : [ctx];
  const names = new Set();
  const typeNames = [];
  for (const t of members) {
    if (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return null;
    if (t.flags & (ts.TypeFlags.Null | ts.TypeFlags.Undefined)) continue;
    if (!(t.flags & ts.TypeFlags.Object)) continue;
    if (checker.getIndexInfosOfType(t).length) return null;
    for (const p of checker.getPropertiesOfType(t)) names.add(p.getName());
    typeNames.push(friendlyType(checker.typeToString(t)));
  }
  return typeNames.length ? { names, type: typeNames.join(" | ") } : null;
}

// IIoK8sApiCoreV1SecurityContext -> SecurityContext
function friendlyType(name) {
  return name
    .replace(/^I(?=[A-Z])/, "")
    .replace(/^IoK8s(?:Api|Apimachinery|KubeAggregator)?[A-Za-z]*?V[0-9]+(?:(?:alpha|beta)[0-9]+)?(?=[A-Z])/, "");
}

function walkLiteral(node, at, checker, found) {
  if (ts.isArrayLiteralExpression(node)) {
    node.elements.forEach((el, i) => walkLiteral(el, `${at}[${i}]`, checker, found));
    return;
  }
  if (!ts.isObjectLiteralExpression(node)) return;
  const declared = declaredProperties(node, checker);
  for (const prop of node.properties) {
    if (!ts.isPropertyAssignment(prop)) continue;
    const key = prop.name.text;
    const where = joinPath(at, key);
    if (declared && !declared.names.has(key)) {
      found.push(`${where}: unknown field (${declared.type} has no "${key}")`);
      continue;
    }
    walkLiteral(prop.initializer, where, checker, found);
  }
}

// ---- 3. across one installation ---------------------------------------------------------------

const workloadKinds = new Set(["Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"]);

function podTemplateOf(obj) {
  if (workloadKinds.has(obj.kind)) return obj.spec && obj.spec.template;
  if (obj.kind === "CronJob") return obj.spec && obj.spec.jobTemplate && obj.spec.jobTemplate.spec && obj.spec.jobTemplate.spec.template;
  if (obj.kind === "Pod") return obj;
  return null;
}

function matches(selector, labels) {
  if (!selector || typeof selector !== "object") return false;
  const ml = selector.matchLabels || {};
  if (!Object.keys(ml).length && !(selector.matchExpressions || []).length) return false;
  for (const [k, v] of Object.entries(ml)) if ((labels || {})[k] !== v) return false;
  for (const e of selector.matchExpressions || []) {
    const has = labels && Object.prototype.hasOwnProperty.call(labels, e.key);
    const v = has ? labels[e.key] : undefined;
    if (e.operator === "In" && !(has && (e.values || []).includes(v))) return false;
    if (e.operator === "NotIn" && has && (e.values || []).includes(v)) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

const ianaSvcName = /^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function bundleErrors(entries) {
  const errs = []; // [entry, message]
  const nsOf = (o) => (o.metadata && o.metadata.namespace) || "default";
  const seen = new Map();
  const configMaps = new Map();
  const namespaces = new Set(["default", "kube-system", "kube-public", "kube-node-lease"]);
  const templates = [];
  for (const e of entries) {
    const o = e.doc;
    const id = `${o.kind}/${nsOf(o)}/${o.metadata && o.metadata.name}`;
    if (seen.has(id)) errs.push([e, `another ${o.kind} with this namespace and name (${seen.get(id)})`]);
    seen.set(id, e.where);
    if (o.kind === "Namespace") namespaces.add(o.metadata.name);
    if (o.kind === "ConfigMap") configMaps.set(`${nsOf(o)}/${o.metadata.name}`, o);
    const t = podTemplateOf(o);
    if (t) templates.push({ entry: e, ns: nsOf(o), template: t });
  }
  const clusterScoped = new Set(["Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding",
    "StorageClass", "PersistentVolume", "RuntimeClass", "CustomResourceDefinition", "Node",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "IngressClass"]);
  for (const e of entries) {
    const o = e.doc;
    if (!clusterScoped.has(o.kind) && o.metadata && o.metadata.namespace && !namespaces.has(o.metadata.namespace))
      errs.push([e, `metadata.namespace: namespace "${o.metadata.namespace}" is not in this bundle`]);
  }

  for (const { entry, ns, template } of templates) {
    const o = entry.doc;
    const spec = template.spec || {};
    const labels = (template.metadata && template.metadata.labels) || {};
    if (o.kind !== "Pod" && o.kind !== "Job" && o.kind !== "CronJob" && !matches(o.spec.selector, labels))
      errs.push([entry, "spec.selector: does not match spec.template.metadata.labels"]);
    const volumes = new Map((spec.volumes || []).map((v) => [v.name, v]));
    for (const [list, key] of [[spec.initContainers || [], "initContainers"], [spec.containers || [], "containers"]]) {
      list.forEach((c, i) => {
        const at = `spec.template.spec.${key}[${i}]`;
        const portNames = new Set();
        (c.ports || []).forEach((p, j) => {
          if (p.name === undefined) return;
          if (!ianaSvcName.test(p.name) || p.name.length > 15)
            errs.push([entry, `${at}.ports[${j}].name: "${p.name}" is not a port name (at most 15 of a-z 0-9 -, a letter among them)`]);
          if (portNames.has(p.name)) errs.push([entry, `${at}.ports[${j}].name: "${p.name}" is used twice`]);
          portNames.add(p.name);
        });
        (c.volumeMounts || []).forEach((m, j) => {
          if (!volumes.has(m.name)) errs.push([entry, `${at}.volumeMounts[${j}].name: no volume "${m.name}" in spec.template.spec.volumes`]);
        });
        for (const probe of ["readinessProbe", "livenessProbe", "startupProbe"]) {
          const p = c[probe];
          const port = p && ((p.tcpSocket && p.tcpSocket.port) || (p.httpGet && p.httpGet.port) || (p.grpc && p.grpc.port));
          if (typeof port === "string" && !portNames.has(port))
            errs.push([entry, `${at}.${probe}: port "${port}" is not a named port of this container`]);
        }
      });
    }
    for (const [name, v] of volumes) {
      if (!v.configMap || v.configMap.optional) continue;
      const cm = configMaps.get(`${ns}/${v.configMap.name}`);
      if (!cm) {
        errs.push([entry, `spec.template.spec.volumes: ConfigMap "${v.configMap.name}" (volume "${name}") is not in this bundle`]);
        continue;
      }
      const keys = new Set([...Object.keys(cm.data || {}), ...Object.keys(cm.binaryData || {})]);
      for (const item of v.configMap.items || [])
        if (!keys.has(item.key)) errs.push([entry, `volume "${name}": ConfigMap "${cm.metadata.name}" has no key "${item.key}"`]);
      const mountsOf = [...(spec.initContainers || []), ...(spec.containers || [])]
        .flatMap((c) => c.volumeMounts || []).filter((m) => m.name === name && m.subPath);
      for (const m of mountsOf)
        if (!keys.has(m.subPath)) errs.push([entry, `volumeMount of "${name}" at ${m.mountPath}: ConfigMap "${cm.metadata.name}" has no key "${m.subPath}"`]);
    }
  }

  for (const e of entries) {
    const o = e.doc;
    const podsOf = (selector, ns) => templates.filter((t) => t.ns === ns && matches(selector, (t.template.metadata || {}).labels));
    if (o.kind === "Service" && o.spec && o.spec.selector) {
      const pods = podsOf({ matchLabels: o.spec.selector }, nsOf(o));
      if (!pods.length) errs.push([e, "spec.selector: matches no pod template in this bundle"]);
      (o.spec.ports || []).forEach((p, i) => {
        if (typeof p.targetPort !== "string") return;
        const named = pods.some((t) => (t.template.spec.containers || []).some((c) => (c.ports || []).some((cp) => cp.name === p.targetPort)));
        if (pods.length && !named) errs.push([e, `spec.ports[${i}].targetPort: no container of the selected pods has a port named "${p.targetPort}"`]);
      });
    }
    if (o.kind === "PodDisruptionBudget" && o.spec && !podsOf(o.spec.selector, nsOf(o)).length)
      errs.push([e, "spec.selector: matches no pod template in this bundle"]);
    const t = podTemplateOf(o);
    const pc = t && t.spec && t.spec.priorityClassName;
    if (pc && !pc.startsWith("system-") && !seen.has(`PriorityClass/default/${pc}`))
      errs.push([e, `spec.template.spec.priorityClassName: PriorityClass "${pc}" is not in this bundle`]);
  }
  return errs;
}

// ---- kustomization.yaml -------------------------------------------------------------------------

const kustomizationKeys = new Set(["apiVersion", "kind", "resources", "components", "patches",
  "images", "namespace", "namePrefix", "nameSuffix", "labels", "commonAnnotations",
  "configMapGenerator", "secretGenerator", "generatorOptions", "replicas"]);

function kustomizationErrors(dir) {
  const errs = [];
  const file = path.join(dir, "kustomization.yaml");
  const { docs, problems } = readDocs(file);
  errs.push(...problems);
  if (docs.length !== 1) return [...errs, "expected one YAML document"];
  const k = docs[0].value;
  for (const key of Object.keys(k)) if (!kustomizationKeys.has(key)) errs.push(`${key}: not a kustomization field this check knows`);
  const isComponent = k.kind === "Component";
  if (isComponent ? k.apiVersion !== "kustomize.config.k8s.io/v1alpha1" : k.apiVersion !== "kustomize.config.k8s.io/v1beta1" || k.kind !== "Kustomization")
    errs.push(`apiVersion/kind: ${k.apiVersion} ${k.kind} is neither a Kustomization (v1beta1) nor a Component (v1alpha1)`);
  const listed = new Set();
  for (const key of ["resources", "components"]) {
    for (const r of k[key] || []) {
      const p = path.join(dir, r);
      if (!fs.existsSync(p)) errs.push(`${key}: ${r} does not exist`);
      listed.add(path.resolve(p));
    }
  }
  for (const p of k.patches || []) {
    if (p.path) {
      if (!fs.existsSync(path.join(dir, p.path))) errs.push(`patches: ${p.path} does not exist`);
      listed.add(path.resolve(dir, p.path));
    }
  }
  for (const name of fs.readdirSync(dir)) {
    if (!/\.ya?ml$/.test(name) || name === "kustomization.yaml") continue;
    if (!listed.has(path.resolve(dir, name))) errs.push(`${name} is in ${dir} but kustomization.yaml does not list it`);
  }
  return errs.map((e) => `${file}: ${e}`);
}

// ---- main ---------------------------------------------------------------------------------------

function main(argv) {
  const inputs = []; // {mode, file}
  const kustomizations = [];
  let extractTo = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs an argument`);
      return argv[++i];
    };
    if (a === "--bundle" || a === "--file" || a === "--broken") {
      const file = next();
      inputs.push({ mode: a.slice(2), file, files: [file] });
    } else if (a === "--bundle-of") {
      const dir = next();
      const k = YAML.parse(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
      const files = (k.resources || []).map((r) => path.join(dir, r)).filter((f) => fs.statSync(f).isFile());
      inputs.push({ mode: "bundle", file: `${dir} (unrendered)`, files });
    }
    else if (a === "--as") {
      if (!inputs.length) throw new Error("--as follows an input");
      inputs[inputs.length - 1].display = next();
    } else if (a === "--kustomization") kustomizations.push(next());
    else if (a === "--extract-to") extractTo = next();
    else throw new Error(`unknown argument ${a} (see the comment at the top of ${path.basename(__filename)})`);
  }

  // Read and check the schema of every object; collect them for the one TypeScript program.
  const all = [];
  for (const input of inputs) {
    input.errors = [];
    input.entries = [];
    for (const file of input.files) {
      const { docs, problems } = readDocs(file);
      const shown = input.display || file;
      input.errors.push(...problems.map((p) => `${shown}: ${p}`));
      for (const { index, value } of docs) {
        const label = `${shown}: document ${index}` +
          (value && value.kind ? ` (${value.kind} ${(value.metadata && value.metadata.namespace) ? value.metadata.namespace + "/" : ""}${(value.metadata && value.metadata.name) || "?"})` : "");
        if (!value || typeof value !== "object" || Array.isArray(value)) {
          input.errors.push(`${label}: not an object`);
          continue;
        }
        const model = resolveModel(value.apiVersion, value.kind);
        if (!model) {
          input.errors.push(`${label}: no schema for apiVersion ${JSON.stringify(value.apiVersion)} kind ${JSON.stringify(value.kind)}`);
          continue;
        }
        const entry = { doc: value, model, label, where: `${path.basename(file)} ${index}`, input };
        entry.schemaErrors = schemaErrors(value, model);
        if (!value.metadata || typeof value.metadata.name !== "string" || !value.metadata.name)
          entry.schemaErrors.push("metadata.name: required");
        input.entries.push(entry);
        all.push(entry);
      }
    }
  }
  if (all.length) fieldNameErrors(all);
  for (const input of inputs) {
    for (const e of input.entries)
      for (const m of [...e.schemaErrors, ...e.fieldErrors]) input.errors.push(`${e.label}: ${m}`);
    if (input.mode === "bundle" || input.mode === "broken")
      for (const [e, m] of bundleErrors(input.entries)) input.errors.push(`${e.label}: ${m}`);
  }

  let failed = false;
  for (const dir of kustomizations) {
    const errs = kustomizationErrors(dir);
    if (errs.length) {
      failed = true;
      for (const e of errs) console.log(`FAIL ${e}`);
    } else {
      console.log(`ok   ${path.join(dir, "kustomization.yaml")}`);
    }
  }
  for (const input of inputs) {
    const n = input.entries.length;
    if (input.mode !== "broken") {
      if (input.errors.length) {
        failed = true;
        for (const e of input.errors) console.log(`FAIL ${e}`);
      } else {
        console.log(`ok   ${input.display || input.file}: ${n} object(s)`);
      }
      continue;
    }
    // A negative control: it must fail, for the reasons it states.
    const text = fs.readFileSync(input.file, "utf8");
    const expected = [...text.matchAll(/^# expect: (.+)$/gm)].map((m) => m[1].trim());
    const output = input.errors.join("\n");
    const missing = expected.filter((x) => !output.includes(x));
    if (!expected.length) {
      failed = true;
      console.log(`FAIL ${input.file}: a negative control needs "# expect: TEXT" lines`);
    } else if (!input.errors.length) {
      failed = true;
      console.log(`FAIL ${input.file}: passed, but it is broken on purpose: the check has stopped seeing ${expected.join("; ")}`);
    } else if (missing.length) {
      failed = true;
      console.log(`FAIL ${input.file}: failed, but not with: ${missing.join("; ")}. It said:`);
      for (const e of input.errors) console.log(`       ${e}`);
    } else {
      console.log(`ok   ${input.file}: refused as expected (${input.errors.length} error(s)), e.g. ${input.errors[0].replace(/^[^:]*: /, "")}`);
    }
  }

  const first = inputs.find((x) => x.mode === "bundle");
  if (extractTo && first) {
    for (const e of first.entries) {
      const o = e.doc;
      const data = (o.kind === "ConfigMap" && o.data) || {};
      if (o.metadata.name === "airlock-policy" && data["policy.toml"])
        fs.writeFileSync(path.join(extractTo, "policy.toml"), data["policy.toml"]);
      if (o.metadata.name === "airlock-fleet-nodes" && data["nodes.txt"])
        fs.writeFileSync(path.join(extractTo, "nodes.txt"), data["nodes.txt"]);
      const init = o.kind === "Deployment" && ((o.spec.template.spec || {}).initContainers || [])
        .find((c) => c.name === "generate-config");
      if (init) fs.writeFileSync(path.join(extractTo, "generate-config.args"),
        [...(init.command || []), ...(init.args || [])].map((a) => a + "\0").join(""));
    }
  }
  return failed ? 1 : 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.error(`validate: ${e.message}`);
  process.exitCode = 2;
}
