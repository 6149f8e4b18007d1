// The tf_stitch tab: profiles (timeline of one step by level, top-k tables, fusion groups)
// and `tf-stitch bench` runs (kernels per step against XLA). Plain DOM and SVG, no
// third-party code; the data comes from this plugin's JSON routes (routes.py).

const SVG = 'http://www.w3.org/2000/svg';
const KERNEL_COLUMNS = [
  ['tf', 'TensorFlow'],
  ['xla_cpu', 'XLA:CPU'],
  ['xla_gpu_triton', 'XLA:GPU (Triton)'],
  ['xla_gpu_cublas', 'XLA:GPU (cuBLAS)'],
  ['tf_stitch_gpu', 'tf_stitch GPU'],
  ['tf_stitch_cpu', 'tf_stitch CPU'],
];

function isDark() {
  try {
    if (window.parent.document.body.classList.contains('dark-mode')) return true;
  } catch (e) { /* not same-origin: fall back to the system setting */ }
  return window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
}

const THEME = isDark()
  ? {bg: '#202124', fg: '#e8eaed', muted: '#9aa0a6', line: '#3c4043', accent: '#8ab4f8',
     levels: ['#8ab4f8', '#81c995', '#fdd663', '#f28b82', '#c58af9'], panel: '#292a2d',
     bars: ['#9aa0a6', '#81c995', '#fdd663', '#fcad70', '#c58af9', '#8ab4f8']}
  : {bg: '#ffffff', fg: '#202124', muted: '#5f6368', line: '#dadce0', accent: '#1a73e8',
     levels: ['#1a73e8', '#188038', '#e37400', '#d93025', '#9334e6'], panel: '#f8f9fa',
     bars: ['#5f6368', '#188038', '#e37400', '#b06000', '#9334e6', '#1a73e8']};

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'style') Object.assign(node.style, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

async function getJson(path, params = {}) {
  const query = new URLSearchParams(params).toString();
  const response = await fetch(`./${path}${query ? '?' + query : ''}`);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function ms(ns) {
  return ns === null || ns === undefined ? 'n/a' : (ns / 1e6).toFixed(3);
}

function section(title, id) {
  return el('section', {id, style: {margin: '16px 0', padding: '12px',
    background: THEME.panel, border: `1px solid ${THEME.line}`, borderRadius: '6px'}},
  el('h3', {style: {margin: '0 0 8px 0'}}, title));
}

function picker(label, names, onChange, id) {
  const select = el('select', {id, onchange: () => onChange(select.value)});
  for (const name of names) select.append(el('option', {value: name}, name));
  return el('label', {style: {marginRight: '16px'}}, `${label} `, select);
}

// -- profiles -------------------------------------------------------------------------------

function lanes(spans) {
  const ends = [];
  return spans.map((s) => {
    let lane = ends.findIndex((end) => end <= s.start_ns);
    if (lane < 0) { lane = ends.length; ends.push(0); }
    ends[lane] = s.end_ns;
    return lane;
  });
}

// `levels`: the profile's levels, outermost first, as the server names them (metadata.LEVELS).
function timeline(container, spans, levels, tooltip) {
  const width = 1100;
  const rowHeight = 18;
  const root = spans.find((s) => s.parent === -1);
  const total = root ? root.end_ns : Math.max(...spans.map((s) => s.end_ns), 1);
  let zoom = 1;
  const rows = [];
  for (const level of levels) {
    const these = spans.filter((s) => s.level === level).sort((a, b) => a.start_ns - b.start_ns);
    if (!these.length) continue;
    const laneOf = lanes(these);
    rows.push({level, spans: these, laneOf, lanes: Math.max(...laneOf) + 1});
  }
  const height = rows.reduce((h, r) => h + r.lanes * rowHeight + 6, 0) + 20;
  const scroller = el('div', {style: {overflowX: 'auto', border: `1px solid ${THEME.line}`}});
  const draw = () => {
    const plot = svg('svg', {width: width * zoom + 90, height, id: 'timeline-svg'});
    let y = 4;
    rows.forEach((row, r) => {
      const label = svg('text', {x: 2, y: y + 13, fill: THEME.muted, 'font-size': 11});
      label.textContent = row.level;
      plot.append(label);
      row.spans.forEach((s, i) => {
        const x = 90 + (s.start_ns / total) * width * zoom;
        const w = Math.max(((s.end_ns - s.start_ns) / total) * width * zoom, 0.5);
        const rect = svg('rect', {x, y: y + row.laneOf[i] * rowHeight, width: w,
          height: rowHeight - 2, fill: THEME.levels[levels.indexOf(row.level)],
          'data-level': row.level, 'data-name': s.name, class: 'span'});
        rect.addEventListener('mousemove', (event) => {
          tooltip.textContent = `${s.level}: ${s.name} (${s.type}) · raw ${ms(s.raw_ns)} ms · ` +
            `corrected ${ms(s.corrected_ns)} ms · run ${s.run}`;
          Object.assign(tooltip.style, {display: 'block', left: `${event.clientX + 12}px`,
            top: `${event.clientY + 12}px`});
        });
        rect.addEventListener('mouseleave', () => { tooltip.style.display = 'none'; });
        plot.append(rect);
      });
      y += row.lanes * rowHeight + 6;
    });
    scroller.replaceChildren(plot);
  };
  const zoomBy = (factor) => { zoom = Math.min(Math.max(zoom * factor, 1), 512); draw(); };
  scroller.addEventListener('wheel', (event) => {
    if (!event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    zoomBy(event.deltaY < 0 ? 1.25 : 0.8);
  });
  container.append(el('div', {style: {margin: '4px 0'}},
    el('button', {onclick: () => zoomBy(2), id: 'zoom-in'}, 'zoom in'), ' ',
    el('button', {onclick: () => zoomBy(0.5)}, 'zoom out'), ' ',
    el('button', {onclick: () => { zoom = 1; draw(); }}, 'reset'),
    el('span', {style: {color: THEME.muted, marginLeft: '8px'}},
      'ctrl + wheel zooms; hover a span for details')));
  container.append(scroller);
  draw();
}

// `order`: the column sorted by at first and whether descending (default: the last, descending).
function sortableTable(rows, columns, id, order = null) {
  const table = el('table', {id, style: {borderCollapse: 'collapse', width: '100%'}});
  let [sortKey, descending] = order || [columns[columns.length - 1][0], true];
  const render = () => {
    const sorted = [...rows].sort((a, b) => {
      const x = a[sortKey]; const y = b[sortKey];
      const order = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
      return descending ? -order : order;
    });
    const head = el('tr', {}, ...columns.map(([key, title]) => el('th', {
      style: {textAlign: 'left', cursor: 'pointer', borderBottom: `1px solid ${THEME.line}`},
      onclick: () => { descending = key === sortKey ? !descending : true; sortKey = key; render(); },
    }, title + (key === sortKey ? (descending ? ' ▼' : ' ▲') : ''))));
    const body = sorted.map((row) => el('tr', {}, ...columns.map(([key, , format]) =>
      el('td', {style: {padding: '2px 8px 2px 0'}}, format ? format(row[key]) : String(row[key])))));
    table.replaceChildren(head, ...body);
  };
  render();
  return table;
}

async function showProfile(run, area, tooltip) {
  try {
    await drawProfile(run, area, tooltip);
  } catch (error) {
    area.replaceChildren(el('p', {class: 'error'}, `Cannot show ${run}: ${error.message}`));
  }
}

async function drawProfile(run, area, tooltip) {
  area.replaceChildren(el('p', {}, `Loading ${run}…`));
  let meta;
  try {
    meta = await getJson('meta', {run});
  } catch (error) {
    area.replaceChildren(el('p', {class: 'error'}, `Cannot read ${run}: ${error.message}`));
    return;
  }
  const levels = Array.isArray(meta.levels) ? meta.levels : [];
  const summary = section('Profile', 'profile-summary');
  summary.append(el('p', {}, `${meta.model}: ${ms(meta.model_latency_ns)} ms per step ` +
    `(run A, untraced) on ${meta.device || 'an unknown device'}; levels ` +
    `${levels.join(', ') || 'none'}.`));
  const overheads = Object.entries(meta.overheads || {}).map(([level, o]) =>
    `${level}: ${(o.overhead * 100).toFixed(1)}% (run ${o.run})`).join(' · ');
  summary.append(el('p', {}, `Tracing overhead by level: ${overheads || 'none measured'}.`));
  if (meta.stability && meta.stability.message) {  // the 95% intervals over blocks, the verdict
    summary.append(el('p', {id: 'stability',
      class: meta.stability.unstable ? 'unstable' : 'stable'}, meta.stability.message));
  }
  if (meta.xprof_trace) {
    summary.append(el('a', {href: `../../../#profile&run=${encodeURIComponent(run)}`,
      target: '_top', id: 'xprof-link'}, 'Open this run in XProf\'s trace viewer'));
  }
  const timelineArea = section('Timeline of one step', 'timeline');
  const tablesArea = section('Top by level', 'top-tables');
  const kernelsArea = section('Fusion groups', 'fusion-groups');
  area.replaceChildren(summary, timelineArea, tablesArea, kernelsArea);
  try {
    const page = await getJson('spans', {run, step: 0, limit: 20000});
    timeline(timelineArea, page.spans, page.levels, tooltip);
    if (page.total > page.spans.length) {
      timelineArea.append(el('p', {}, `Showing ${page.spans.length} of ${page.total} spans.`));
    }
  } catch (error) {
    timelineArea.append(el('p', {class: 'error'}, `Cannot read the spans: ${error.message}`));
  }
  for (const level of levels.filter((lv) => lv !== 'model')) {
    try {
      const top = await getJson('top', {run, level, k: 15});
      tablesArea.append(el('h4', {}, level), sortableTable(top.rows, [
        ['name', 'name'], ['type', 'type'],
        ['calls_per_step', 'calls/step', (v) => v.toFixed(1)],
        ['share', 'share', (v) => `${(v * 100).toFixed(1)}%`],
        ['corrected_ns', 'ms/step', ms],
      ], `top-${level}`));
    } catch (error) {
      tablesArea.append(el('p', {class: 'error'}, `${level}: ${error.message}`));
    }
  }
  try {
    const {kernels} = await getJson('kernels', {run});
    if (!kernels.length) {
      kernelsArea.append(el('p', {}, 'No fusion groups: this run is not a tf_stitch-optimized ' +
        'graph (profile one with `tf-stitch profile MODEL --optimize`).'));
    }
    const source = el('pre', {id: 'kernel-source', style: {maxHeight: '400px', overflow: 'auto',
      background: THEME.bg, padding: '8px', border: `1px solid ${THEME.line}`}});
    const list = el('ul', {id: 'kernel-list'});
    const members = el('p', {id: 'kernel-members'});
    for (const k of kernels) {
      list.append(el('li', {style: {cursor: 'pointer', color: THEME.accent},
        onclick: () => {
          members.textContent = `${k.node} (${k.name}): ${k.members.join(', ')}`;
          source.textContent = k.source;
        }},
      `${k.node}: ${k.members.length} ops, ${k.schedule}; ${k.memory}`));
    }
    kernelsArea.append(list, members, source);
  } catch (error) {
    kernelsArea.append(el('p', {class: 'error'}, error.message));
  }
  try {
    const {decisions} = await getJson('decisions', {run});
    if (decisions.length) {
      const rows = decisions.map((d, i) => ({...d, order: i}));
      kernelsArea.append(el('h4', {}, `Decisions (${rows.length}, each once, as explain() ` +
        'prints them)'), sortableTable(rows, [
        ['order', '#'], ['kind', 'kind'], ['subject', 'what'], ['verdict', 'verdict'],
        ['reason', 'reason'],
      ], 'fusion-decisions', ['order', false]));
    }
  } catch (error) {
    kernelsArea.append(el('p', {class: 'error'}, `Cannot read the decisions: ${error.message}`));
  }
}

// -- bench runs -----------------------------------------------------------------------------

function launchChart(doc) {
  const workloads = Object.entries(doc.workloads || {});
  const width = 1100;
  const barHeight = 9;
  const groupHeight = KERNEL_COLUMNS.length * barHeight + 12;
  const max = Math.max(1, ...workloads.flatMap(([, r]) =>
    KERNEL_COLUMNS.map(([key]) => r.kernels[key] || 0)));
  const plot = svg('svg', {width, height: workloads.length * groupHeight + 30, id: 'bench-chart'});
  KERNEL_COLUMNS.forEach(([, title], i) => {
    const swatch = svg('rect', {x: 150 + i * 150, y: 2, width: 10, height: 10,
      fill: THEME.bars[i]});
    const text = svg('text', {x: 164 + i * 150, y: 11, fill: THEME.fg, 'font-size': 11});
    text.textContent = title;
    plot.append(swatch, text);
  });
  workloads.forEach(([name, r], w) => {
    const y0 = 24 + w * groupHeight;
    const label = svg('text', {x: 0, y: y0 + groupHeight / 2, fill: THEME.fg, 'font-size': 12});
    label.textContent = name;
    plot.append(label);
    KERNEL_COLUMNS.forEach(([key], i) => {
      const value = r.kernels[key];
      if (value === null || value === undefined) return;
      const w2 = (value / max) * (width - 220);
      plot.append(svg('rect', {x: 150, y: y0 + i * barHeight, width: Math.max(w2, 1),
        height: barHeight - 1, fill: THEME.bars[i], class: 'bar',
        'data-workload': name, 'data-column': key, 'data-value': value}));
      const text = svg('text', {x: 154 + w2, y: y0 + i * barHeight + 8, fill: THEME.muted,
        'font-size': 9});
      text.textContent = String(value);
      plot.append(text);
    });
  });
  return plot;
}

async function showBench(run, area) {
  area.replaceChildren(el('p', {}, `Loading ${run}…`));
  try {
    const doc = await getJson('bench', {run});
    const box = section('Kernels per step: TensorFlow vs XLA vs tf_stitch', 'bench');
    box.append(el('p', {}, `Measured ${doc.date} on ${doc.machine.host} ` +
      `(${doc.machine.cpus} CPUs), XLA:GPU compiled for ${doc.gpu_target || 'no GPU'}.`));
    box.append(launchChart(doc));
    const rows = Object.entries(doc.workloads).map(([name, r]) => ({name, ...r.kernels,
      latency: r.latency_ms.tf_stitch.median_ms / r.latency_ms['XLA:CPU'].median_ms}));
    box.append(sortableTable(rows, [['name', 'workload'],
      ...KERNEL_COLUMNS.map(([key, title]) => [key, title, (v) => (v ?? 'n/a').toString()]),
      ['latency', 'tf_stitch / XLA:CPU latency', (v) => v.toFixed(2)]], 'bench-table'));
    area.replaceChildren(box);
  } catch (error) {
    area.replaceChildren(el('p', {class: 'error'}, `Cannot read ${run}: ${error.message}`));
  }
}

export async function render() {
  Object.assign(document.body.style, {background: THEME.bg, color: THEME.fg,
    fontFamily: 'Roboto, sans-serif', fontSize: '13px', margin: '16px'});
  const tooltip = el('div', {id: 'tooltip', style: {position: 'fixed', display: 'none',
    background: THEME.panel, color: THEME.fg, border: `1px solid ${THEME.line}`,
    padding: '4px 6px', pointerEvents: 'none', zIndex: 10, maxWidth: '600px'}});
  document.body.append(el('h2', {}, 'tf_stitch'), tooltip);
  let runs;
  try {
    runs = await getJson('runs');
  } catch (error) {
    document.body.append(el('p', {class: 'error'}, `Cannot list the runs: ${error.message}`));
    return;
  }
  if (!runs.profiles.length && !runs.bench.length) {
    document.body.append(el('p', {id: 'empty-state'}, 'No tf_stitch data in this logdir; run ' +
      '`tf-stitch profile MODEL --logdir DIR` or `tf-stitch bench --out DIR` (then point ' +
      'TensorBoard at DIR/tensorboard) to make some.'));
    return;
  }
  const controls = el('div', {id: 'controls'});
  const profileArea = el('div', {id: 'profile-area'});
  const benchArea = el('div', {id: 'bench-area'});
  if (runs.profiles.length) {
    controls.append(picker('Profile', runs.profiles, (r) => showProfile(r, profileArea, tooltip),
      'profile-picker'));
  } else {
    profileArea.append(el('p', {}, 'No profiles here: `tf-stitch profile MODEL --logdir DIR`.'));
  }
  if (runs.bench.length) {
    controls.append(picker('Benchmark', runs.bench, (r) => showBench(r, benchArea),
      'bench-picker'));
  } else {
    benchArea.append(el('p', {}, 'No launch counts here: `tf-stitch bench --out DIR`.'));
  }
  document.body.append(controls, profileArea, benchArea);
  // Each part fails on its own: a broken run never keeps the rest of the tab from rendering.
  const shown = [];
  if (runs.profiles.length) shown.push(showProfile(runs.profiles[0], profileArea, tooltip));
  if (runs.bench.length) shown.push(showBench(runs.bench[0], benchArea));
  for (const result of await Promise.allSettled(shown)) {
    if (result.status === 'rejected') {
      document.body.append(el('p', {class: 'error'}, String(result.reason)));
    }
  }
}
