// Agent Forge debug viewer. Read-only. The owner token lives only in the
// `token` variable below: the password field is cleared as soon as it is
// read, and the token leaves the page only in the Authorization header of
// same-origin GET requests. Nothing is stored (no cookies, storage or URL
// state). All data is rendered with textContent.
'use strict';

(function () {
  let token = '';
  let jobsCursor = '';
  let lanesCursor = '';
  let timelineCursor = '';
  let currentJob = '';
  let busy = false;
  let liveTimer = 0;
  let liveInflight = false;

  // Live activity refreshes on its own 5 s timer while a job drawer is
  // open, independently of backlog loading (it ignores the `busy` flag and
  // never touches the listings).
  const liveEveryMs = 5000;

  const $ = (id) => document.getElementById(id);

  function setStatus(text, isError) {
    const el = $('status');
    el.textContent = text;
    el.className = isError ? 'error' : '';
  }

  // api performs one authenticated GET and returns the decoded JSON.
  async function api(path, params) {
    if (!token) {
      throw new Error('enter the owner token first');
    }
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== '' && v !== undefined) {
        qs.set(k, String(v));
      }
    }
    const query = qs.toString();
    const resp = await fetch(path + (query ? '?' + query : ''), {
      method: 'GET',
      headers: { 'Authorization': 'Bearer ' + token, 'Accept': 'application/json' },
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
      referrerPolicy: 'no-referrer',
    });
    if (resp.status === 401) {
      forget();
      throw new Error('the Gate refused the token');
    }
    if (!resp.ok) {
      let code = 'HTTP ' + resp.status;
      try {
        const body = await resp.json();
        if (body && body.error && typeof body.error.code === 'string') {
          code = body.error.code;
        }
      } catch (e) {
        // keep the status code
      }
      throw new Error(code);
    }
    return resp.json();
  }

  function text(s) {
    return s === undefined || s === null ? '' : String(s);
  }

  function cell(row, value, className) {
    const td = document.createElement('td');
    td.textContent = text(value);
    if (className) {
      td.className = className;
    }
    row.appendChild(td);
    return td;
  }

  function clear(el) {
    while (el.firstChild) {
      el.removeChild(el.firstChild);
    }
  }

  function statusClass(prefix, value) {
    return /^[a-z_]{1,32}$/.test(text(value)) ? prefix + value : '';
  }

  // ---- jobs ----

  function renderJobRow(job) {
    const tr = document.createElement('tr');
    tr.dataset.jobId = text(job.id);
    cell(tr, job.id, 'mono');
    cell(tr, job.kind);
    cell(tr, job.status, statusClass('st-', job.status));
    cell(tr, job.attempt_count);
    cell(tr, job.created_at, 'mono');
    cell(tr, job.updated_at, 'mono');
    tr.addEventListener('click', () => openJob(text(job.id)));
    $('jobs-body').appendChild(tr);
  }

  async function loadJobs(more) {
    const page = await api('/v1/debug/jobs', { limit: 25, cursor: more ? jobsCursor : '' });
    if (!more) {
      clear($('jobs-body'));
    }
    for (const job of page.jobs || []) {
      renderJobRow(job);
    }
    jobsCursor = text(page.next_cursor);
    $('jobs-more').hidden = !jobsCursor;
  }

  // ---- lanes ----

  function renderLaneRow(lane) {
    const tr = document.createElement('tr');
    cell(tr, lane.lane, 'mono');
    cell(tr, lane.worker_id, 'mono');
    cell(tr, lane.pool);
    cell(tr, lane.connected ? 'connected' : 'disconnected', lane.connected ? 'conn-up' : 'conn-down');
    cell(tr, lane.connected ? lane.connected_at : lane.disconnected_at, 'mono');
    cell(tr, lane.job_id, 'mono');
    $('lanes-body').appendChild(tr);
  }

  async function loadLanes(more) {
    const page = await api('/v1/debug/workers', { limit: 25, cursor: more ? lanesCursor : '' });
    if (!more) {
      clear($('lanes-body'));
    }
    for (const lane of page.lanes || []) {
      renderLaneRow(lane);
    }
    lanesCursor = text(page.next_cursor);
    $('lanes-more').hidden = !lanesCursor;
  }

  // ---- job drawer ----

  const jobFields = [
    ['id', 'Job'], ['kind', 'Kind'], ['status', 'Status'], ['failure_code', 'Failure code'],
    ['repository_id', 'Repository'], ['base_sha', 'Base SHA'],
    ['attempt_count', 'Attempts'], ['retry_at', 'Retry at'], ['created_at', 'Created'], ['updated_at', 'Updated'],
    ['delivery_phase', 'Delivery phase'], ['delivery_branch', 'Branch'], ['pr_url', 'Pull request'],
    ['ci_state', 'CI'], ['merge_sha', 'Merge SHA'],
  ];

  // usageText renders model gateway usage ("" when not metered).
  function usageText(u) {
    if (!u) {
      return '';
    }
    return text(u.requests) + ' req, ' + text(u.input_tokens) + ' in (' + text(u.cached_tokens) + ' cached), ' +
      text(u.output_tokens) + ' out';
  }

  // totalUsage sums the metered attempts' usage (undefined when none was).
  function totalUsage(attempts) {
    let total;
    for (const a of attempts || []) {
      if (!a.usage) {
        continue;
      }
      total = total || {requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0};
      for (const k of Object.keys(total)) {
        total[k] += Number(a.usage[k]) || 0;
      }
    }
    return total;
  }

  function renderJobFields(job, attempts) {
    const dl = $('job-fields');
    clear(dl);
    const fields = jobFields.map(([key, label]) => [label, job[key]]);
    const usage = totalUsage(attempts);
    if (usage) {
      fields.push(['Model usage', usageText(usage)]);
    }
    for (const [label, value] of fields) {
      if (value === undefined) {
        continue;
      }
      const dt = document.createElement('dt');
      dt.textContent = label;
      const dd = document.createElement('dd');
      dd.textContent = text(value);
      dl.appendChild(dt);
      dl.appendChild(dd);
    }
  }

  function renderAttempts(attempts) {
    const body = $('attempts-body');
    clear(body);
    for (const a of attempts || []) {
      const tr = document.createElement('tr');
      cell(tr, a.ordinal);
      cell(tr, a.status, statusClass('st-', a.status));
      cell(tr, a.worker_id, 'mono');
      cell(tr, a.leased_at, 'mono');
      cell(tr, a.deadline_at, 'mono');
      cell(tr, a.completed_at, 'mono');
      cell(tr, a.disposition);
      cell(tr, a.failure_code);
      cell(tr, usageText(a.usage), 'mono');
      body.appendChild(tr);
    }
  }

  function renderEvents(events) {
    const list = $('timeline');
    for (const e of events || []) {
      const li = document.createElement('li');
      let line = text(e.at) + '  ' + text(e.type);
      if (e.attempt !== undefined) {
        line += '  attempt ' + text(e.attempt);
      }
      if (e.code !== undefined) {
        line += '  (' + text(e.code) + ')';
      }
      li.textContent = line;
      li.className = 'mono';
      list.appendChild(li);
    }
  }

  async function loadTimeline(more) {
    const id = currentJob;
    const page = await api('/v1/debug/jobs/' + encodeURIComponent(id), { limit: 25, cursor: more ? timelineCursor : '' });
    if (id !== currentJob) {
      return; // another job was opened meanwhile
    }
    if (!more) {
      $('drawer-title').textContent = 'Job ' + text(page.job && page.job.id);
      renderJobFields(page.job || {}, page.attempts);
      renderAttempts(page.attempts);
      clear($('timeline'));
    }
    renderEvents(page.events);
    timelineCursor = text(page.next_cursor);
    $('timeline-more').hidden = !timelineCursor;
  }

  async function refreshLive() {
    const id = currentJob;
    if (!id || liveInflight) {
      return;
    }
    liveInflight = true;
    try {
      const page = await api('/v1/debug/jobs/' + encodeURIComponent(id) + '/activity', {});
      if (id !== currentJob) {
        return;
      }
      const list = $('live-list');
      clear(list);
      const acts = page.activity || [];
      for (const a of acts) {
        const li = document.createElement('li');
        li.className = 'mono';
        li.textContent = text(a.at) + '  ' + text(a.stage) + '  attempt ' + text(a.attempt) + ' on ' + text(a.worker_id);
        list.appendChild(li);
      }
      let note;
      if (!page.live) {
        note = 'Live activity is not enabled on this Gate.';
      } else if (acts.length === 0) {
        note = 'No live activity: the job is not running, or its Worker does not report stages.';
      } else {
        note = 'Current stage: ' + text(acts[acts.length - 1].stage) + ' (as of ' + text(page.as_of) + ')';
      }
      $('live-note').textContent = note;
    } catch (e) {
      if (id === currentJob) {
        $('live-note').textContent = 'Live activity unavailable: ' + text(e && e.message);
      }
    } finally {
      liveInflight = false;
    }
  }

  function startLive() {
    stopLive();
    refreshLive();
    liveTimer = setInterval(refreshLive, liveEveryMs);
  }

  function stopLive() {
    if (liveTimer) {
      clearInterval(liveTimer);
      liveTimer = 0;
    }
  }

  function openJob(id) {
    currentJob = id;
    timelineCursor = '';
    clear($('live-list'));
    $('live-note').textContent = 'loading live activity…';
    startLive();
    for (const tr of $('jobs-body').children) {
      tr.classList.toggle('selected', tr.dataset.jobId === id);
    }
    $('drawer').hidden = false;
    run(() => loadTimeline(false), 'job loaded');
  }

  function closeDrawer() {
    stopLive();
    currentJob = '';
    $('drawer').hidden = true;
  }

  // ---- session ----

  async function run(fn, done) {
    if (busy) {
      return;
    }
    busy = true;
    try {
      setStatus('loading…', false);
      await fn();
      setStatus(done, false);
    } catch (e) {
      setStatus('error: ' + text(e && e.message), true);
    } finally {
      busy = false;
    }
  }

  function refreshAll() {
    return run(async () => {
      await loadJobs(false);
      await loadLanes(false);
    }, 'loaded');
  }

  function forget() {
    token = '';
    jobsCursor = lanesCursor = timelineCursor = '';
    closeDrawer();
    clear($('jobs-body'));
    clear($('lanes-body'));
    $('main').hidden = true;
    $('forget').hidden = true;
  }

  function connect(ev) {
    ev.preventDefault();
    const field = $('token');
    token = field.value.trim();
    field.value = '';
    if (!token) {
      setStatus('enter the owner token', true);
      return;
    }
    $('main').hidden = false;
    $('forget').hidden = false;
    refreshAll();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('login').addEventListener('submit', connect);
    $('forget').addEventListener('click', () => { forget(); setStatus('token forgotten', false); });
    $('refresh').addEventListener('click', refreshAll);
    $('jobs-more').addEventListener('click', () => run(() => loadJobs(true), 'loaded'));
    $('lanes-more').addEventListener('click', () => run(() => loadLanes(true), 'loaded'));
    $('timeline-more').addEventListener('click', () => run(() => loadTimeline(true), 'loaded'));
    $('drawer-close').addEventListener('click', closeDrawer);
  });
})();
