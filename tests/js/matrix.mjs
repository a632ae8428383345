// The role x office x operation matrix through @supabase/supabase-js (tests/supabase/
// test_matrix_js.py seeds the database and compares). Input: $MATRIX (url, anonKey, serviceKey,
// password, users: name -> email, offices: name -> {id, command, questions: who -> id,
// jobs: who -> id}). Output: {who: {office: {operation: outcome}}} where an outcome is
// "ok" (rows returned or changed), "none" (no error, nothing), "denied" (42501: no privilege,
// or a policy refused the row) or "error:<code>".
import { createClient } from '@supabase/supabase-js'
import WebSocket from 'ws'

const cfg = JSON.parse(process.env.MATRIX)

function client(key) {
  return createClient(cfg.url, key, {
    auth: { persistSession: false, autoRefreshToken: false },
    realtime: globalThis.WebSocket ? {} : { transport: WebSocket },
  })
}

async function as(who) {
  if (who === 'anon') return client(cfg.anonKey)
  if (who === 'service_role') return client(cfg.serviceKey)
  const supabase = client(cfg.anonKey)
  const { error } = await supabase.auth.signInWithPassword({ email: cfg.users[who], password: cfg.password })
  if (error) throw new Error(`sign-in of ${who}: ${error.message}`)
  return supabase
}

function outcome({ data, error }) {
  if (error) return error.code === '42501' ? 'denied' : `error:${error.code}`
  if (Array.isArray(data)) return data.length > 0 ? 'ok' : 'none'
  return data === null || data === undefined || data === 0 ? 'none' : 'ok'
}

const TABLES = ['agents', 'agent_sessions', 'agent_commands', 'user_questions', 'agent_invocations',
  'agent_results', 'jobs', 'engines', 'job_events', 'office_members']

async function operations(supabase, who, office) {
  const o = {}
  o.read_office = outcome(await supabase.from('offices').select('id').eq('id', office.id))
  for (const table of TABLES) {
    o[`read_${table}`] = outcome(await supabase.from(table).select('*').eq('office_id', office.id))
  }
  o.read_agent_command_results = outcome(
    await supabase.from('agent_command_results').select('id').eq('command_id', office.done))
  o.insert_command = outcome(await supabase.from('agent_commands')
    .insert({ office_id: office.id, command_type: 'run_job', payload: { job_id: 'x' } }).select('id'))
  o.answer_question = outcome(await supabase.from('user_questions')
    .update({ status: 'answered', answer: 'yes' }).eq('id', office.questions[who]).select('id'))
  o.create_job = outcome(await supabase.rpc('semo_create_job',
    { p_office_id: office.id, p_role: 'BE', p_task: 'from the matrix' }))
  o.cancel_job = outcome(await supabase.rpc('semo_cancel_job', { p_job_id: office.jobs[who], p_reason: 'matrix' }))
  o.claim = outcome(await supabase.rpc('semo_claim_next',
    { p_office_id: office.id, p_engine_id: `matrix-${who}`, p_lease_seconds: 30 }))
  o.heartbeat = outcome(await supabase.rpc('semo_record_heartbeat',
    { p_office_id: office.id, p_engine_id: `matrix-${who}`, p_dead_after: 60, p_starting: true }))
  o.insert_result = outcome(await supabase.from('agent_command_results')
    .insert({ command_id: office.command, success: true }).select('id'))
  o.update_session = outcome(await supabase.from('agent_sessions')
    .update({ status: 'error' }).eq('office_id', office.id).select('session_id'))
  o.read_migrations = outcome(await supabase.from('semo_migrations').select('name'))
  o.add_member = outcome(await supabase.from('office_members')
    .insert({ office_id: office.id, user_id: cfg.userIds.stranger, role: 'operator' }).select('user_id'))
  if (who !== 'service_role') {
    o.delete_office = outcome(await supabase.from('offices').delete().eq('id', office.id).select('id'))
    o.end_engine = outcome(await supabase.rpc('semo_end_engine', {
      p_office_id: office.id, p_engine_id: 'engine-1', p_session_reason: 's', p_command_error: 'c',
      p_job_reason: 'j', p_unless_alive: false,
    }))
    o.complete = outcome(await supabase.rpc('semo_complete_command', {
      p_command_id: office.command, p_engine_id: 'engine-1', p_success: true, p_result: null,
      p_error: null,
    }))
  }
  return o
}

const out = {}
try {
  for (const who of cfg.order) {
    const supabase = await as(who)
    out[who] = {}
    for (const [name, office] of Object.entries(cfg.offices)) {
      out[who][name] = await operations(supabase, who, office)
    }
  }
  out.ok = true
} catch (error) {
  out.ok = false
  out.error = String(error && error.stack ? error.stack : error)
}
process.stdout.write(JSON.stringify(out) + '\n')
process.exit(0)
