// Validate a .glb or .gltf with the Khronos glTF-Validator; print its JSON report on stdout.
// Usage: node validate_gltf.mjs FILE.glb   (exit 0 whatever the report says; the caller reads it)
import { readFile } from "node:fs/promises";
import validator from "gltf-validator";

const path = process.argv[2];
const bytes = new Uint8Array(await readFile(path));
const report = await validator.validateBytes(bytes, {
  uri: path,
  maxIssues: 200,
  externalResourceFunction: () => Promise.reject(new Error("external resources are not allowed")),
});
process.stdout.write(JSON.stringify(report, null, 1));
