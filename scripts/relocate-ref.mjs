// `session relocate OLD NEW` checked by the real pi and omp (driven by scripts/relocate-check.py).
//
//   node22 scripts/relocate-ref.mjs --agent pi  --ours BIN --runtime RT --home DIR
//   bun --preload <conformance>/lib/omp-preload.ts scripts/relocate-ref.mjs --agent omp --ours BIN --runtime RT --home DIR
//
// In an empty HOME the reference itself writes sessions whose cwd is OLD, OLD's
// subfolders, and a sibling whose name only starts like OLD (it must stay), each with an
// artifacts folder; it records every session's context and branch. Then our command
// relocates OLD to NEW (a dry run first, which must change nothing), and the reference
// lists OLD and NEW again, opens each moved session from its new bucket and resumes the
// most recent one of NEW. Prints one JSON report; exits 1 when anything differs.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const arg = name => {
	const i = process.argv.indexOf(name);
	if (i < 0 || i + 1 >= process.argv.length) throw new Error(`${name} is required`);
	return process.argv[i + 1];
};
const agent = arg("--agent");
const ours = arg("--ours");
const rt = arg("--runtime");
const home = fs.realpathSync(arg("--home"));

// Both references take their folders from HOME, which must be set before the runtime
// starts (bun reads it once; omp freezes its folders when its bundle loads).
if (os.homedir() !== home || process.env.PI_CODING_AGENT_DIR) {
	console.error(`relocate-ref: run with HOME=${home} and no PI_CODING_AGENT_DIR`);
	process.exit(2);
}
process.env.PI_NO_TELEMETRY = "1";

async function load() {
	if (agent === "pi") {
		const pkg = path.join(rt, "pi/node_modules/@earendil-works/pi-coding-agent");
		const mod = await import(pathToFileURL(path.join(pkg, "dist/core/session-manager.js")).href);
		const M = mod.SessionManager;
		return {
			create: cwd => M.create(cwd),
			open: file => M.open(file),
			list: cwd => M.list(cwd),
			recent: cwd => M.continueRecent(cwd),
			close: async () => {},
		};
	}
	const lib = await import(path.join(rt, "omp/node_modules/@oh-my-pi/pi-coding-agent/dist/omp-lib.js"));
	for (const k of Object.keys(lib)) if (k.startsWith("__init_")) lib[k]();
	const M = lib.__ns_sessionManager.SessionManager;
	const opts = { suppressBreadcrumb: true };
	return {
		create: cwd => M.create(cwd),
		open: file => M.open(file, undefined, undefined, opts),
		list: cwd => M.list(cwd),
		recent: cwd => M.continueRecent(cwd),
		close: async m => {
			await m.flush();
			await m.close();
		},
	};
}

const A = await load();
const base = path.join(home, "projects");
const OLD = path.join(base, "app");
const NEW = path.join(base, "renamed", "app");
const cwds = [OLD, path.join(OLD, "sub"), path.join(OLD, "sub", "deeper dir"), path.join(base, "app-sibling")];
for (const c of cwds) fs.mkdirSync(c, { recursive: true });

let clock = Date.parse("2026-03-01T10:00:00.000Z");
const usage = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const user = text => ({ role: "user", content: text, timestamp: (clock += 1000) });
const assistant = text => ({ role: "assistant", content: [{ type: "text", text }], api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-4-5", usage, stopReason: "stop", timestamp: (clock += 1000) });

const made = [];
for (const [k, cwd] of cwds.entries()) {
	for (let n = 0; n < 2; n++) {
		const m = await A.create(cwd);
		const first = await m.appendMessage(user(`question ${k}.${n} asked in ${cwd}`));
		m.appendMessage(assistant(`answer ${k}.${n}`));
		if (n === 1) {
			// a second branch from the first question, then back to the newest leaf
			const leaf = m.getLeafId();
			m.branch(first);
			m.appendMessage(assistant(`another answer ${k}.${n}`));
			m.branch(leaf);
			m.appendMessage(user(`follow-up ${k}.${n}`));
			m.appendMessage(assistant(`follow-up answer ${k}.${n}`));
			m.appendSessionInfo?.(`named ${k}.${n}`);
		}
		const file = m.getSessionFile();
		await A.close(m);
		const artifacts = file.slice(0, -".jsonl".length);
		fs.mkdirSync(artifacts, { recursive: true });
		fs.writeFileSync(path.join(artifacts, "note.txt"), `artifact of ${k}.${n}\n`);
		made.push({ cwd, file });
	}
}

async function snapshot(file) {
	const m = await A.open(file);
	const s = { id: m.getHeader().id, cwd: m.getHeader().cwd, leaf: m.getLeafId(), branch: m.getBranch().map(e => e.id), context: m.buildSessionContext() };
	await A.close(m);
	return s;
}
const before = new Map();
for (const s of made) before.set(s.file, await snapshot(s.file));
const listed = async cwd => (await A.list(cwd)).map(i => i.path).sort();

const problems = [];
const env = { ...process.env, HOME: home };
delete env.PI_CODING_AGENT_DIR;
const run = args => execFileSync(ours, ["--dialect", agent, ...args], { env, cwd: home, encoding: "utf8" });

// A dry run changes nothing (our derived caches under ~/.cache aside).
const tree = dir => execFileSync("find", [dir, "-mindepth", "1", "-path", path.join(dir, ".cache"), "-prune", "-o", "-printf", "%P %s %T@\n"], { encoding: "utf8" }).split("\n").sort().join("\n");
const untouched = tree(home);
run(["relocate", OLD, NEW]);
if (tree(home) !== untouched) problems.push("the dry run changed the home");
run(["relocate", OLD, NEW, "--yes"]);
// A second run finds nothing left to move.
const again = JSON.parse(run(["relocate", OLD, NEW, "--yes", "--json"]));
if (again.sessions.length !== 0) problems.push(`a second run found ${again.sessions.length} session(s) to move`);

for (const s of made) {
	const b = before.get(s.file);
	const inside = s.cwd === OLD || s.cwd.startsWith(OLD + path.sep);
	const cwd = inside ? NEW + s.cwd.slice(OLD.length) : s.cwd;
	const now = await listed(cwd);
	const found = [];
	for (const p of now) {
		const snap = await snapshot(p);
		if (snap.id === b.id) found.push([p, snap]);
	}
	if (found.length !== 1) {
		problems.push(`${b.id}: ${found.length} session(s) with its id listed by ${agent} for ${cwd}`);
		continue;
	}
	const [p, after] = found[0];
	if (inside && fs.existsSync(s.file)) problems.push(`${s.file} is still in the old bucket`);
	if (after.cwd !== cwd) problems.push(`${p}: header cwd ${after.cwd}, expected ${cwd}`);
	for (const k of ["leaf", "branch", "context"])
		if (JSON.stringify(after[k]) !== JSON.stringify(b[k])) problems.push(`${p}: ${k} differs after the move`);
	const note = path.join(p.slice(0, -".jsonl".length), "note.txt");
	if (!fs.existsSync(note)) problems.push(`${p}: its artifacts did not move with it`);
	if (inside) {
		const left = await listed(s.cwd);
		if (left.length) problems.push(`${agent} still lists ${left.length} session(s) for ${s.cwd}`);
	}
}
// The agent resumes the newest session of NEW (a cold start with `--continue`).
const r = await A.recent(NEW);
const resumed = r.getSessionFile();
await A.close(r);
const newest = made.filter(s => s.cwd === OLD).at(-1);
if (!resumed || (await snapshot(resumed)).id !== before.get(newest.file).id) problems.push(`continueRecent(${NEW}) resumed ${resumed}, not ${before.get(newest.file).id}`);

console.log(JSON.stringify({ agent, sessions: made.length, problems }));
process.exit(problems.length ? 1 : 0);
