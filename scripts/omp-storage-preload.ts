// Bun preload (after ../shared/conformance/lib/omp-preload.ts): serves the prepared omp
// 18.3.4 bundle (dist/omp-lib.js) with its export clause extended by the server storages'
// namespaces (SqlSessionStorage, RedisSessionStorage), found by pattern as
// lib/omp-prepare.ts finds the session modules. The change is made in memory when the
// bundle is loaded; no file is written.
import * as fs from "node:fs";

const WANTED: Record<string, string> = { sqlStorage: "SqlSessionStorage", redisStorage: "RedisSessionStorage" };

/** Returns `src` with `__ns_<name>` and `__init_<name>` exports added for each wanted namespace. */
export function extendExports(src: string): string {
	const extra: string[] = [];
	for (const [name, key] of Object.entries(WANTED)) {
		// the module's own namespace has exactly this one key; the package index has hundreds
		const m = new RegExp(`var ([A-Za-z0-9_$]+)=\\{\\};P\\(\\1,\\{${key}:\\(\\)=>[A-Za-z0-9_$]+\\}\\);`).exec(src);
		if (!m) throw new Error(`omp-storage-preload: the namespace of ${key} is not in the bundle; its layout changed`);
		const ns = m[1];
		const init = new RegExp(`\\(([A-Za-z0-9_$]+)\\(\\),${ns.replace(/\$/g, "\\$")}\\)`).exec(src);
		if (!init) throw new Error(`omp-storage-preload: the initialiser of ${key} is not in the bundle`);
		extra.push(`${ns} as __ns_${name}`, `${init[1]} as __init_${name}`);
	}
	const tail = /export\{([^}]*)\};\s*$/.exec(src);
	if (!tail) throw new Error("omp-storage-preload: the final export clause is not in the bundle");
	return `${src.slice(0, tail.index)}export{${tail[1]},${extra.join(",")}};\n`;
}

Bun.plugin({
	name: "omp-server-storages",
	setup(build) {
		build.onLoad({ filter: /[\\/]pi-coding-agent[\\/]dist[\\/]omp-lib\.js$/ }, args => ({
			contents: extendExports(fs.readFileSync(args.path, "utf8")),
			loader: "js",
		}));
	},
});
