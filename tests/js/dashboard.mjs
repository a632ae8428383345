// A web dashboard, written with the official client (@supabase/supabase-js), driving a running
// semo engine through Supabase (the emulator in tests). Run by tests/supabase/test_dashboard_js.py:
//
//   node dashboard.mjs
//
// Input: the JSON object in $DASHBOARD (url, anonKey, office, otherOffice, password, the users'
// emails: operator, viewer, outsider). Output: one JSON object on stdout with what each user
// could and could not do; the Python test asserts on it. Nothing here knows semo's internals
// beyond the tables, the two job functions and the private channel `office:{id}`.
import { createClient } from '@supabase/supabase-js'
import WebSocket from 'ws'

const cfg = JSON.parse(process.env.DASHBOARD)
const out = {}
const TIMEOUT = 30_000

function client() {
  return createClient(cfg.url, cfg.anonKey, {
    auth: { persistSession: false, autoRefreshToken: false },
    // Node 22+ and browsers have a WebSocket; older Node gets the `ws` package
    realtime: globalThis.WebSocket ? {} : { transport: WebSocket },
  })
}

function until(what, check, timeout = TIMEOUT) {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const tick = async () => {
      try {
        const value = await check()
        if (value) return resolve(value)
      } catch (error) {
        return reject(error)
      }
      if (Date.now() - started > timeout) return reject(new Error(`timed out: ${what}`))
      setTimeout(tick, 50)
    }
    tick()
  })
}

async function signIn(email) {
  const supabase = client()
  const { data, error } = await supabase.auth.signInWithPassword({ email, password: cfg.password })
  if (error) throw new Error(`sign-in of ${email} failed: ${error.message}`)
  // Realtime uses the user's token (supabase-js sets it on sign-in; said here for clarity)
  await supabase.realtime.setAuth(data.session.access_token)
  return supabase
}

function subscribe(channel) {
  return new Promise((resolve) => {
    channel.subscribe((status, error) => {
      if (status !== 'CLOSED') resolve({ status, error: error ? String(error.message || error) : null })
    })
  })
}

function failure(result) {
  return result.error ? { code: result.error.code ?? null, message: result.error.message } : null
}

async function operator() {
  const supabase = await signIn(cfg.operator)
  const me = {}
  const results = []
  const questions = []
  const broadcasts = []
  const channel = supabase
    .channel(`office:${cfg.office}`, { config: { private: true } })
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'agent_command_results' },
      (payload) => results.push(payload.new))
    .on('postgres_changes',
      { event: 'INSERT', schema: 'public', table: 'user_questions', filter: `office_id=eq.${cfg.office}` },
      (payload) => questions.push(payload.new))
    .on('broadcast', { event: 'semo_event' }, (message) => broadcasts.push(message.payload))
  me.join = await subscribe(channel)
  // changes flow once "Subscribed to PostgreSQL" has come (the system message)
  await new Promise((resolve) => setTimeout(resolve, 300))

  const sessions = await supabase.from('agent_sessions').select('session_id, agent_id, status')
    .eq('office_id', cfg.office).neq('status', 'terminated')
  const agents = await supabase.from('agents').select('id, role').eq('office_id', cfg.office)
  const fe = agents.data.find((a) => a.role === 'FE')
  const session = sessions.data.find((s) => s.agent_id === fe.id)
  me.sessions = sessions.data.length

  // a command, and its result by Realtime
  const started = Date.now()
  const inserted = await supabase.from('agent_commands')
    .insert({ office_id: cfg.office, session_id: session.session_id, command_type: 'get_output', payload: {} })
    .select('id').single()
  me.insert = failure(inserted)
  const result = await until('the command result', () =>
    results.find((r) => r.command_id === inserted.data.id))
  me.result = { success: result.success, ms: Date.now() - started, hasText: JSON.stringify(result.result).length > 2 }

  // a job: created with semo_create_job, followed by Realtime, its question answered by UPDATE
  const created = await supabase.rpc('semo_create_job', {
    p_office_id: cfg.office, p_role: 'FE', p_task: 'Build the login page',
  })
  me.createJob = failure(created)
  const job = Array.isArray(created.data) ? created.data[0] : created.data
  const question = await until('the job question', () =>
    questions.find((q) => q.status === 'pending' && q.question.includes('Which database')))
  const answered = await supabase.from('user_questions')
    .update({ status: 'answered', answer: 'postgres' }).eq('id', question.id).select('status, answered_at')
  me.answer = { error: failure(answered), rows: answered.data }
  const done = await until('the job done', async () => {
    const { data } = await supabase.from('jobs').select('status, failure_reason').eq('id', job.id).single()
    return data && ['done', 'failed'].includes(data.status) ? data : null
  }, 60_000)
  me.job = done
  // the timeline's closing entry is written just after the job's status: follow it until it
  // lands (or the wait runs out, and the test shows what the timeline held)
  me.jobSteps = []
  await until('the job timeline closed', async () => {
    const steps = await supabase.from('job_events').select('step').eq('job_id', job.id).order('id')
    me.jobSteps = (steps.data || []).map((s) => s.step)
    return me.jobSteps.includes(done.status) ? true : null
  }, 10_000).catch(() => null)
  me.jobBroadcasts = broadcasts.filter((b) => b && b.job_id === job.id).length
  me.broadcasts = broadcasts.length
  me.broadcastSample = broadcasts.slice(0, 3)

  // a job cancelled: a new one, cancelled at once
  const second = await supabase.rpc('semo_create_job', {
    p_office_id: cfg.office, p_role: 'BE', p_task: 'Wait forever',
  })
  const secondJob = Array.isArray(second.data) ? second.data[0] : second.data
  const cancelled = await supabase.rpc('semo_cancel_job', { p_job_id: secondJob.id, p_reason: 'changed my mind' })
  me.cancel = { error: failure(cancelled), rows: cancelled.data }

  // engine work is refused
  const claim = await supabase.rpc('semo_claim_next', { p_office_id: cfg.office, p_engine_id: 'evil', p_lease_seconds: 30 })
  me.claim = failure(claim)
  const forged = await supabase.from('agent_command_results').insert({ command_id: inserted.data.id, success: false })
  me.forgedResult = failure(forged)
  const ended = await supabase.rpc('semo_end_engine', {
    p_office_id: cfg.office, p_engine_id: 'x', p_session_reason: 's', p_command_error: 'c', p_job_reason: 'j', p_unless_alive: false,
  })
  me.endEngine = failure(ended)
  const deleted = await supabase.from('offices').delete().eq('id', cfg.office).select()
  me.deleteOffice = { error: failure(deleted), rows: deleted.data }
  const other = await supabase.from('agent_commands').select('id').eq('office_id', cfg.otherOffice)
  me.otherOfficeCommands = other.data
  await supabase.removeAllChannels()
  return me
}

async function viewer() {
  const supabase = await signIn(cfg.viewer)
  const me = {}
  const offices = await supabase.from('offices').select('name')
  me.offices = offices.data
  const commands = await supabase.from('agent_commands').select('id').eq('office_id', cfg.office)
  me.commandsSeen = commands.data.length
  const inserted = await supabase.from('agent_commands')
    .insert({ office_id: cfg.office, command_type: 'run_job', payload: { job_id: 'x' } })
  me.insert = failure(inserted)
  const answered = await supabase.from('user_questions')
    .update({ status: 'answered', answer: 'sqlite' }).eq('office_id', cfg.office).select('id')
  me.answer = { error: failure(answered), rows: answered.data }
  const job = await supabase.rpc('semo_create_job', { p_office_id: cfg.office, p_role: 'FE', p_task: 'x' })
  me.createJob = failure(job)
  const channel = supabase.channel(`office:${cfg.office}`, { config: { private: true } })
  me.join = await subscribe(channel)
  await supabase.removeAllChannels()
  return me
}

async function outsider() {
  const supabase = await signIn(cfg.outsider)
  const me = {}
  const tables = ['offices', 'agents', 'agent_sessions', 'agent_commands', 'agent_command_results',
    'user_questions', 'jobs', 'job_events', 'engines', 'office_members']
  me.seen = {}
  for (const table of tables) {
    const { data, error } = await supabase.from(table).select('*')
    me.seen[table] = error ? `error ${error.code}` : data.filter((r) => (r.office_id ?? r.id) === cfg.office || table === 'agent_command_results').length
  }
  const inserted = await supabase.from('agent_commands')
    .insert({ office_id: cfg.office, command_type: 'run_job', payload: { job_id: 'x' } })
  me.insert = failure(inserted)
  const channel = supabase.channel(`office:${cfg.office}`, { config: { private: true } })
  me.join = await subscribe(channel)
  await supabase.removeAllChannels()
  return me
}

async function anon() {
  const supabase = client()
  const me = {}
  const offices = await supabase.from('offices').select('*')
  me.offices = failure(offices)
  const migrations = await supabase.from('semo_migrations').select('*')
  me.migrations = failure(migrations)
  const deleted = await supabase.from('semo_migrations').delete().neq('name', '')
  me.deleteMigrations = failure(deleted)
  const channel = supabase.channel(`office:${cfg.office}`, { config: { private: true } })
  me.join = await subscribe(channel)
  await supabase.removeAllChannels()
  return me
}

try {
  out.operator = await operator()
  out.viewer = await viewer()
  out.outsider = await outsider()
  out.anon = await anon()
  out.ok = true
} catch (error) {
  out.ok = false
  out.error = String(error && error.stack ? error.stack : error)
}
process.stdout.write(JSON.stringify(out) + '\n')
process.exit(0)
