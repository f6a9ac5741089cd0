// Drives rollcage serve --e2b-addr with the stock E2B JS SDK, the way
// slime and other E2B harnesses do. Run by e2b/sdk_docker_test.go, which
// sets E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY and ROLLCAGE_TEST_IMAGE,
// and checks the trajectories afterwards. Prints one JSON line of facts;
// exits 1 on the first failed expectation.
import { createHash } from 'node:crypto'
import { Sandbox, CommandExitError } from 'e2b'

const image = process.env.ROLLCAGE_TEST_IMAGE
if (!image) throw new Error('set ROLLCAGE_TEST_IMAGE to a task image')
const facts = {}

function expect(name, ok, detail) {
  if (!ok) {
    console.error(`FAIL ${name}: ${JSON.stringify(detail)}`)
    process.exit(1)
  }
}

const t0 = Date.now()
const sbx = await Sandbox.create({ metadata: { 'rollcage/image': image, run: 'sdk-test' }, timeoutMs: 300_000 })
facts.createMs = Date.now() - t0
facts.sandboxId = sbx.sandboxId

// Foreground: envs, cwd, user, timeout.
let r = await sbx.commands.run('echo "$GREETING from $(pwd)"; id -u', { envs: { GREETING: 'hi' }, cwd: '/tmp', user: 'root', timeoutMs: 60_000 })
expect('foreground', r.exitCode === 0 && r.stdout.startsWith('hi from /tmp\n'), r)
facts.uid = r.stdout.split('\n')[1]

// A non-zero exit raises CommandExitError with the code and the output.
try {
  await sbx.commands.run('echo partial; exit 7')
  expect('non-zero exit raises', false, 'no error')
} catch (e) {
  expect('CommandExitError', e instanceof CommandExitError && e.exitCode === 7 && e.stdout.includes('partial'), { name: e.name, exitCode: e.exitCode, message: e.message })
}

// A command past its timeout is a TimeoutError.
try {
  await sbx.commands.run('sleep 30', { timeoutMs: 2_000 })
  expect('timeout raises', false, 'no error')
} catch (e) {
  expect('TimeoutError', e.name === 'TimeoutError', { name: e.name, message: e.message })
}

// Background, then wait().
const h = await sbx.commands.run('sleep 1; echo bg-done', { background: true })
expect('background pid', h.pid > 0, h.pid)
const hr = await h.wait()
expect('background wait', hr.exitCode === 0 && hr.stdout === 'bg-done\n', hr)

// Output streams as it is written, stdout and stderr to their own
// callbacks: the first lines come a second before the last.
const seen = []
const since = Date.now()
r = await sbx.commands.run('echo o1; echo e1 >&2; sleep 1; echo o2', {
  onStdout: d => seen.push({ s: 'out', d, at: Date.now() - since }),
  onStderr: d => seen.push({ s: 'err', d, at: Date.now() - since }),
})
const at = (s, d) => (seen.find(x => x.s === s && x.d === d) || { at: -1 }).at
expect('streamed callbacks', r.stdout === 'o1\no2\n' && r.stderr === 'e1\n' && at('out', 'o1\n') >= 0 && at('err', 'e1\n') >= 0 &&
  at('out', 'o2\n') - Math.max(at('out', 'o1\n'), at('err', 'e1\n')) >= 500, seen)
facts.streamGapMs = at('out', 'o2\n') - at('out', 'o1\n')

// stdin after start.
const reader = await sbx.commands.run('read l; echo got:$l; cat; echo closed', { background: true, stdin: true })
await sbx.commands.sendStdin(reader.pid, 'hello\n')
await reader.sendStdin('more\n')
await reader.closeStdin()
const rr = await reader.wait()
expect('sendStdin', rr.exitCode === 0 && rr.stdout === 'got:hello\nmore\nclosed\n', rr)

// Processes run side by side: a background one waits for a file the
// foreground ones (two at once) make.
const waiter = await sbx.commands.run('while [ ! -e /tmp/e2b-go ]; do sleep 0.1; done; echo released', { background: true })
const both = await Promise.all([sbx.commands.run('echo a'), sbx.commands.run('echo b')])
expect('concurrent', both[0].stdout === 'a\n' && both[1].stdout === 'b\n', both)
await sbx.commands.run('touch /tmp/e2b-go')
const wr = await waiter.wait()
expect('concurrent background', wr.stdout === 'released\n', wr)

// A running process: listed, reattached by pid, killed; its waiters see
// the kill as a non-zero exit.
const long = await sbx.commands.run('sleep 30', { background: true })
const procs = await sbx.commands.list()
expect('commands.list', procs.some(p => p.pid === long.pid && p.args.includes('sleep 30')), procs)
const again = await sbx.commands.connect(long.pid)
expect('commands.kill', (await sbx.commands.kill(long.pid)) === true, 'kill')
try {
  await again.wait()
  expect('killed wait raises', false, 'no error')
} catch (e) {
  expect('killed: CommandExitError', e instanceof CommandExitError && e.exitCode === -1, { name: e.name, exitCode: e.exitCode, message: e.message })
}
expect('kill unknown pid', (await sbx.commands.kill(99999)) === false, 'kill 99999')

// Files: write, read, list, exists.
const info = await sbx.files.write('/tmp/e2b-note.txt', 'note from the sdk\n')
expect('write', info.path === '/tmp/e2b-note.txt', info)
const text = await sbx.files.read('/tmp/e2b-note.txt')
expect('read', text === 'note from the sdk\n', text)
const entries = await sbx.files.list('/tmp')
expect('list', entries.some(e => e.name === 'e2b-note.txt' && e.type === 'file' && e.size === 18), entries)
expect('exists', (await sbx.files.exists('/tmp/e2b-note.txt')) && !(await sbx.files.exists('/tmp/nope')), 'exists')

// Binary files upload as they are (the SDK sends multipart) and read
// back as they are, of any size, in each of the SDK's formats.
const bin = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 0xff, 0xfe, 0x00, 0x0a, 0xc3])
await sbx.files.write('/tmp/e2b-bin', bin.buffer)
r = await sbx.commands.run('od -An -tx1 /tmp/e2b-bin')
expect('binary write', r.stdout.trim().split(/\s+/).join(' ') === '7f 45 4c 46 ff fe 00 0a c3', r.stdout)
const every = new Uint8Array(3 * 256).map((_, i) => i % 256)
await sbx.files.write('/tmp/e2b-every', every.buffer)
const everyBack = await sbx.files.read('/tmp/e2b-every', { format: 'bytes' })
expect('every byte value reads back', everyBack.length === every.length && everyBack.every((b, i) => b === every[i]), Array.from(everyBack.slice(0, 16)))
await sbx.files.write('/tmp/e2b-every-gz', every.buffer, { gzip: true })
const everyGz = await sbx.files.read('/tmp/e2b-every-gz', { format: 'bytes' })
expect('gzip write lands unpacked', everyGz.length === every.length && everyGz.every((b, i) => b === every[i]), Array.from(everyGz.slice(0, 16)))
const everyBlob = await sbx.files.read('/tmp/e2b-every', { format: 'blob' })
expect('blob read', everyBlob.size === every.length, everyBlob.size)
const bigSize = 33 * 1024 * 1024 + 7
r = await sbx.commands.run(`head -c ${bigSize} /dev/urandom > /tmp/e2b-big && sha256sum /tmp/e2b-big`)
const bigSum = r.stdout.split(' ')[0]
const sha256 = data => createHash('sha256').update(data).digest('hex')
let readT0 = Date.now()
const big = await sbx.files.read('/tmp/e2b-big', { format: 'bytes' })
facts.bigReadMs = Date.now() - readT0
expect('33 MiB read as bytes', big.length === bigSize && sha256(big) === bigSum, { length: big.length, want: bigSize })
readT0 = Date.now()
const stream = await sbx.files.read('/tmp/e2b-big', { format: 'stream' })
const streamHash = createHash('sha256')
let streamed = 0
for await (const chunk of stream) {
  streamHash.update(chunk)
  streamed += chunk.length
}
facts.bigStreamMs = Date.now() - readT0
expect('33 MiB read as a stream', streamed === bigSize && streamHash.digest('hex') === bigSum, { streamed, want: bigSize })
try {
  await sbx.files.read('/tmp/e2b-none', { format: 'bytes' })
  expect('missing read errs', false, 'read a missing file')
} catch (e) {
  expect('missing read: FileNotFoundError', e.name === 'FileNotFoundError', { name: e.name, message: e.message })
}

// A watch of the workspace sees the file a write makes.
const watched = []
const wh = await sbx.files.watchDir('/workspace', ev => { watched.push(ev) }, { timeoutMs: 0 })
await sbx.files.write('/workspace/e2b-watched.txt', 'watched\n')
for (let i = 0; i < 100 && !watched.some(ev => ev.name === 'e2b-watched.txt'); i++) await new Promise(res => setTimeout(res, 100))
await wh.stop()
expect('watchDir', watched.some(ev => ev.name === 'e2b-watched.txt' && ev.type === 'create'), watched)

// Known hacks, answered by the monitor as if they ran: the history of
// all refs (rewritten) and a read of the hidden tests (blocked: dummy
// output). A non-zero dummy exit raises like a real one.
async function outcome(cmd) {
  try {
    const r = await sbx.commands.run(cmd)
    return { exitCode: r.exitCode, stdout: r.stdout }
  } catch (e) {
    return { exitCode: e.exitCode, stdout: e.stdout }
  }
}
facts.history = await outcome('git log --all --oneline')
facts.hidden = await outcome('cat /opt/grader/tests/test_hidden.py')

// slime's detached pattern: setsid, an exit-code marker file, polling.
const t1 = Date.now()
await sbx.commands.run("setsid bash -c 'sleep 2; echo detached-out > /tmp/d.log; echo $? > /tmp/d.exit' > /dev/null 2>&1 < /dev/null &")
facts.detachReturnMs = Date.now() - t1
let marker = ''
for (let i = 0; i < 60 && marker === ''; i++) {
  r = await sbx.commands.run('cat /tmp/d.exit 2>/dev/null || true')
  marker = r.stdout.trim()
  if (marker === '') await new Promise(res => setTimeout(res, 500))
}
expect('detached marker', marker === '0', marker)
expect('detached output', (await sbx.files.read('/tmp/d.log')) === 'detached-out\n', 'd.log')

// List by metadata, then kill; a second kill says false.
const page = await Sandbox.list({ query: { metadata: { run: 'sdk-test' } } }).nextItems()
expect('list sandboxes', page.length === 1 && page[0].sandboxId === sbx.sandboxId, page)
expect('kill', (await sbx.kill()) === true, 'kill')
expect('kill again', (await Sandbox.kill(sbx.sandboxId)) === false, 'kill again')
// A task-bound sandbox, graded through rollcage's extension endpoint.
const task = process.env.ROLLCAGE_TEST_TASK
if (task) {
  const graded = await Sandbox.create({ metadata: { 'rollcage/task': task } })
  const res = await fetch(`${process.env.E2B_API_URL}/sandboxes/${graded.sandboxId}/rollcage/submit`, {
    method: 'POST', headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }, body: '{"message":"unchanged"}',
  })
  const outcome = await res.json()
  expect('submit', res.status === 200 && outcome.episode_id === graded.sandboxId && outcome.task_id === task, { status: res.status, outcome })
  facts.outcome = { resolved: outcome.resolved, reward: outcome.reward, passed: outcome.passed, failed: outcome.failed, label: outcome.label }
  expect('graded sandbox ended', (await graded.kill()) === false, 'kill after submit')
}
// A harness that grades outside (slime) posts its reward and reads the
// monitor's labels back through the E2B API.
async function rollcage(method, id, route, body) {
  const res = await fetch(`${process.env.E2B_API_URL}/sandboxes/${id}/rollcage/${route}`, {
    method, headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }, body,
  })
  return { status: res.status, body: await res.json() }
}
const rewarded = await Sandbox.create({ metadata: { 'rollcage/image': image, run: 'sdk-reward' } })
await rewarded.commands.run('cat /opt/grader/tests/test_hidden.py').catch(e => e) // blocked: a hack
facts.infoLabel = (await rewarded.getInfo()).metadata['rollcage/label']
let res = await rollcage('POST', rewarded.sandboxId, 'reward', '{"reward": 2}')
expect('reward out of range', res.status === 400 && res.body.message.includes('outside [0, 1]'), res)
res = await rollcage('POST', rewarded.sandboxId, 'reward', '{"reward": 1, "source": "slime-swe"}')
expect('reward', res.status === 200 && res.body.episode_id === rewarded.sandboxId, res)
facts.rewarded = { reason: res.body.reason, reward: res.body.reward, resolved: res.body.resolved, label: res.body.label, failureClass: res.body.failure_class }
res = await rollcage('POST', rewarded.sandboxId, 'reward', '{"reward": 0}')
expect('second reward', res.status === 409, res)
res = await rollcage('GET', rewarded.sandboxId, 'labels')
expect('labels', res.status === 200, res)
facts.labels = res.body
expect('rewarded sandbox ended', (await rewarded.kill()) === false, 'kill after reward')
console.log(JSON.stringify(facts))
