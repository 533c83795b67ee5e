// The omp side of scripts/omp-server-roundtrip.py: omp 18.3.4's own SessionManager on its
// own server storages (SqlSessionStorage on PostgreSQL, MariaDB and a SQLite file through bun:sql,
// RedisSessionStorage through Bun's Redis client), reached from the published bundle (see omp-storage-preload.ts).
//
//   bun --preload ../shared/conformance/lib/omp-preload.ts --preload scripts/omp-storage-preload.ts \
//       scripts/omp-server.ts JOB.json
//
// JOB.json: {"backend": {"kind": "postgres" | "mysql", "url": U, "table": T} | {"kind": "sqlite", "path": DB, "table": T}
//                       | {"kind": "redis", "url": U, "prefix": P},
//            "blobs": DIR, "gen"?: {"seed": S, "count": N, "dir": D}, "queries"?: [[cmd, path, args...], ...]}
// With `gen`, writes the corpus generator's scenarios (../shared/conformance/lib/common.mjs, the
// damaged ones left out: damage is made to files, not through the API) into the storage under
// D/<scenario>/. Then answers each query with the conformance CLI contract on a fresh load
// through the storage. Prints {"files": [paths in the storage under D], "answers": [{result} | {error}]}.
import * as fs from "node:fs";
import * as path from "node:path";
import { makeOmpAdapter } from "../../shared/conformance/lib/adapter-omp.ts";
import { runCli } from "../../shared/conformance/lib/cli-common.mjs";
import { Rng, runOps, scenarioSeed, scenarioShape } from "../../shared/conformance/lib/common.mjs";
import { RUNTIME_DIR } from "../../shared/conformance/lib/runtime-dir.mjs";

const job = JSON.parse(fs.readFileSync(process.argv[2]!, "utf8"));
const A = await makeOmpAdapter();
// the same module instance the adapter loaded, with the storages' exports added by the preload
const lib: any = await import(path.join(RUNTIME_DIR, "omp/node_modules/@oh-my-pi/pi-coding-agent/dist/omp-lib.js"));
lib.__init_sqlStorage();
lib.__init_redisStorage();
const OPEN_OPTS = { suppressBreadcrumb: true };

let client: any;
async function openStorage(): Promise<any> {
	const b = job.backend;
	if (b.kind === "postgres" || b.kind === "mysql") {
		client = new Bun.SQL(b.url);
		return lib.__ns_sqlStorage.SqlSessionStorage.create({ client, table: b.table });
	}
	if (b.kind === "sqlite") {
		client = new Bun.SQL({ adapter: "sqlite", filename: b.path });
		return lib.__ns_sqlStorage.SqlSessionStorage.create({ client, table: b.table });
	}
	client = new Bun.RedisClient(b.url);
	return lib.__ns_redisStorage.RedisSessionStorage.create({ client, prefix: b.prefix });
}

// omp's manager on an indexed storage rewrites against a durable size that advances only
// once the storage confirms the previous publish; a second write before that throws
// SessionWriteConflictError ("expected missing"). An agent awaits each turn; so does this.
for (const op of ["appendMessage", "appendModel", "appendThinking", "appendCompaction", "branch", "resetLeaf", "branchWithSummary", "label", "setName", "custom", "customMessage", "ompMeta"]) {
	const f = A[op];
	A[op] = async (m: any, ...rest: any[]) => {
		const r = await f(m, ...rest);
		await m.flush();
		return r;
	};
}

function onStorage(storage: any) {
	A.create = async (cwd: string, dir: string) => A.SessionManager.create(cwd, dir, storage);
	A.open = async (file: string) => A.SessionManager.open(file, undefined, storage, OPEN_OPTS);
	A.forkFrom = async (m: any, cwd: string, dir: string) => {
		await m.flush();
		const n = await A.SessionManager.forkFrom(m.getSessionFile(), cwd, dir, storage, OPEN_OPTS);
		await m.close();
		return n;
	};
	A.forkQuery = async (file: string, cwd: string, dir: string) => {
		const n = await A.SessionManager.forkFrom(file, cwd, dir, storage, OPEN_OPTS);
		const p = n.getSessionFile();
		await n.flush();
		await n.close();
		return { path: p };
	};
	A.list = async (cwd: string, dir: string) => A.SessionManager.list(cwd, dir, storage);
}

const out: any = { files: [], answers: [] };
const home = fs.mkdtempSync(path.join(A.home, "cwd-"));
try {
	A.routeBlobs(job.blobs);
	if (job.gen) {
		const storage = await openStorage();
		onStorage(storage);
		for (let i = 0; i < job.gen.count; i++) {
			const shape = scenarioShape(i, job.gen.seed, 40);
			if (shape.damage) continue;
			const dir = path.join(job.gen.dir, shape.name);
			// the process works in an empty local directory, as the generator does
			process.chdir(home);
			A.onCwdChange();
			await runOps(new Rng(scenarioSeed(job.gen.seed, i)), shape, A, dir);
			for (const f of storage.listFilesSync(dir, "*.jsonl").sort()) out.files.push(f);
		}
		await storage.drain();
		await client.close?.();
		await client.end?.();
	}
	if (job.queries?.length) {
		// a fresh storage: its index is loaded from the server, so it sees what other processes wrote
		const storage = await openStorage();
		onStorage(storage);
		for (const q of job.queries) {
			try {
				out.answers.push({ result: (await runCli(q, A)) ?? null });
			} catch (e: any) {
				out.answers.push({ error: String(e?.message ?? e) });
			}
		}
		await storage.drain();
		await client.close?.();
		await client.end?.();
	}
} finally {
	A.cleanup();
}
await new Promise<void>((resolve, reject) => process.stdout.write(JSON.stringify(out) + "\n", e => (e ? reject(e) : resolve())));
process.exit(0);
