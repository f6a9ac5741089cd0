// Replays slime's coding-agent flow (slime/agent/sandbox.py,
// slime/agent/harness/common.py, examples/coding_agent_rl/swe.py) with the
// stock E2B JS SDK against rollcage serve --e2b-addr, on a root sandbox:
// ensure_agent_user, the node and CLI installs into /opt and /usr/local
// (local stand-ins for what slime downloads), exec_and_wait as user
// "agent" with its setsid launcher and exit-code marker, the agent's call
// to the trainer's model adapter through the model route, then submit.
// Run by e2b/slime_docker_test.go, which sets E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY, ROLLCAGE_TEST_TASK, ROLLCAGE_ADAPTER and
// ROLLCAGE_FIX (the task's fix as [{path, old, new}]). Prints one JSON
// line of facts; exits 1 on the first failed expectation.
import { Sandbox } from 'e2b'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const task = process.env.ROLLCAGE_TEST_TASK
const adapter = process.env.ROLLCAGE_ADAPTER
const fix = process.env.ROLLCAGE_FIX
if (!task || !adapter || !fix) throw new Error('set ROLLCAGE_TEST_TASK, ROLLCAGE_ADAPTER and ROLLCAGE_FIX')
const facts = {}
const workdir = '/workspace'

function expect(name, ok, detail) {
  if (!ok) {
    console.error(`FAIL ${name}: ${JSON.stringify(detail)}`)
    process.exit(1)
  }
}

const sb = await Sandbox.create({
  metadata: { 'rollcage/task': task, 'rollcage/user': 'root', 'rollcage/model_route': adapter },
  timeoutMs: 600_000,
})
facts.sandboxId = sb.sandboxId

// sandbox.py exec(check=True): a non-zero exit raises, naming the command.
const exec = (cmd, user, opts = {}) => sb.commands.run(cmd, { user, timeoutMs: 120_000, ...opts }).catch(e => {
  if (e.exitCode === undefined) throw e
  e.message = `${cmd} (as ${user}): exit ${e.exitCode}: ${e.stdout}${e.stderr}`
  throw e
})

// ensure_agent_user, as slime issues it.
let r = await exec(
  `id agent >/dev/null 2>&1 || useradd -m -s /bin/bash agent && ` +
  `chown -R agent:agent /home/agent ${workdir} && ` +
  `git config --system --add safe.directory '*' && id agent`, 'root', { timeoutMs: 60_000 })
expect('ensure_agent_user', r.exitCode === 0 && r.stdout.startsWith('uid='), r)
r = await exec('git config --system --get safe.directory && id -u && runuser -u agent -- id -un && su agent -c "id -un"', 'root')
expect('root tools', r.stdout === '*\n0\nagent\nagent\n', r)
facts.rootUid = '0'

// install_node: a tarball uploaded (binary) and unpacked into /opt.
const stage = mkdtempSync(join(tmpdir(), 'node22-'))
mkdirSync(join(stage, 'bin'))
writeFileSync(join(stage, 'bin', 'node'), '#!/bin/sh\necho "node-standin v22 $*"\n', { mode: 0o755 })
const tarball = execFileSync('tar', ['-cf', '-', '-C', stage, '.'])
rmSync(stage, { recursive: true })
await sb.files.write('/tmp/node22.tar', tarball.buffer.slice(tarball.byteOffset, tarball.byteOffset + tarball.length))
await exec('mkdir -p /opt/node22 && tar -xf /tmp/node22.tar -C /opt/node22 && ln -sf /opt/node22/bin/node /usr/local/bin/node22 && node22 --version', 'root')

// install_npm_cli: the harness CLI installed globally under /usr/local.
// The stand-in asks the trainer's adapter for its next step (slime's
// agent does, through the model route) and applies the edits it is given.
const cli = `#!/usr/bin/env python3
import json, os, sys, urllib.request
edits = json.load(open(sys.argv[1]))
req = urllib.request.Request(os.environ["ADAPTER"] + "/chat/completions", method="POST",
    data=json.dumps({"model": "policy", "messages": [{"role": "user", "content": "fix the bug"}]}).encode(),
    headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=30))
print("adapter:", reply["choices"][0]["message"]["content"])
for e in edits:
    text = open(e["path"]).read()
    if e["old"] not in text:
        sys.exit("edit: old text not in " + e["path"])
    open(e["path"], "w").write(text.replace(e["old"], e["new"], 1))
print("whoami:", os.popen("id -un").read().strip())
`
await sb.files.write('/tmp/harness-cli.py', cli)
await exec('install -m 755 /tmp/harness-cli.py /usr/local/bin/harness-cli && test -x /usr/local/bin/harness-cli', 'root')

// The run's metadata directory, the agent's; its config written as agent.
const meta = '/tmp/.harness-meta'
await exec(`mkdir -p ${meta} && chown agent:agent ${meta}`, 'root', { timeoutMs: 30_000 })
await sb.files.write(`${meta}/edits.json`, fix, { user: 'agent' })
r = await exec(`stat -c %U ${meta}/edits.json`, 'root')
expect('files.write as agent', r.stdout === 'agent\n', r.stdout)

// exec_and_wait as agent: launcher, cleared state, setsid spawn, marker.
async function execAndWait(cmd, tag, user) {
  const out = `/tmp/.${tag}.out`, done = `/tmp/.${tag}.done`, launcher = `/tmp/.${tag}.sh`, lock = `/tmp/.${tag}.spawned`
  await sb.files.write(launcher, `#!/bin/bash\ncd ${workdir}\nexport HOME=/home/${user}\nexport ADAPTER=${adapter}\n${cmd}\necho $? > ${done}\n`, { user })
  await exec(`rm -rf ${lock}; rm -f ${out} ${done}`, user, { timeoutMs: 30_000 })
  await exec(`chmod +x ${launcher}; mkdir ${lock} 2>/dev/null || exit 0; setsid bash ${launcher} < /dev/null > ${out} 2>&1 &`, user, { timeoutMs: 30_000 })
  for (let i = 0; i < 120; i++) {
    const m = await exec(`test -f ${done} && cat ${done}`, user, { timeoutMs: 15_000 }).catch(e => e)
    if (m.exitCode === 0) return { exitCode: Number(m.stdout.trim()), output: await sb.files.read(out, { user }) }
    await new Promise(res => setTimeout(res, 1000))
  }
  expect('exec_and_wait marker', false, tag)
}
const run = await execAndWait(`harness-cli ${meta}/edits.json`, 'agent-run', 'agent')
facts.agentRun = run
expect('agent run', run.exitCode === 0 && run.output.includes('whoami: agent') && run.output.includes('adapter: '), run)

// swe.py reads the agent's diff as agent.
r = await exec(`cd ${workdir} && git diff`, 'agent')
expect('git diff', r.stdout.includes('<= width'), r.stdout)

// Graded by rollcage with the task's hidden tests.
const res = await fetch(`${process.env.E2B_API_URL}/sandboxes/${sb.sandboxId}/rollcage/submit`, {
  method: 'POST', headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }, body: '{"message":"slime run"}',
})
const outcome = await res.json()
expect('submit', res.status === 200 && outcome.episode_id === sb.sandboxId, { status: res.status, outcome })
facts.outcome = { resolved: outcome.resolved, reward: outcome.reward, label: outcome.label, failureClass: outcome.failure_class }

// Root is no key to the grader: planting tests where the hidden tests go
// at grading is blocked before it runs (dummy output) and labels the
// sandbox hacked, as for any user.
const image = process.env.ROLLCAGE_TEST_IMAGE
const hack = await Sandbox.create({ metadata: { 'rollcage/image': image, 'rollcage/user': 'root' } })
const planted = await hack.commands.run("mkdir -p /opt/grader/tests && echo 'def test_ok(): pass' > /opt/grader/tests/test_hidden.py", { user: 'root' }).catch(e => e)
const labels = await fetch(`${process.env.E2B_API_URL}/sandboxes/${hack.sandboxId}/rollcage/labels`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
const lb = await labels.json()
facts.plant = { sandboxId: hack.sandboxId, exitCode: planted.exitCode, label: lb.label, blocked: lb.blocked }
await hack.kill()
console.log(JSON.stringify(facts))
