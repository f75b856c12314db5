// Marks each build output's module system for Node: dist/esm is ESM, dist/cjs CommonJS.
const fs = require("fs");
fs.writeFileSync("dist/esm/package.json", '{ "type": "module" }\n');
fs.writeFileSync("dist/cjs/package.json", '{ "type": "commonjs" }\n');
