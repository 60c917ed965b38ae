//! The startup phases of a vLLM server, each the time between a start line and an end line, as llm-d-benchmark's
//! nop harness finds them: `DEFINED_CATEGORIES`, `get_log_list_per_process`, `populate_benchmark_categories`,
//! `populate_benchmark_category`, `add_uncategorized_categories`, `BenchmarkCategory._dump` and
//! `write_benchmark_categories_to_log` of `workload/harnesses/nop_functions.py` (llm-d/llm-d-benchmark).
//!
//! The phases form upstream's linked list (a category, its `next`, its first child), kept here as indices into one
//! vector. Lines are read process by process, so a worker's phase is not cut short by the API server's lines.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::lines::{LogLine, Pattern, Process};

/// One of upstream's phases: a title, the pattern of its first line and of its last, its sub-phases.
#[derive(Debug, Clone, Copy)]
pub struct CategoryDef {
    pub title: &'static str,
    pub start: Pattern,
    pub end: Pattern,
    pub children: &'static [CategoryDef],
}

/// Upstream's `DEFINED_CATEGORIES`, verbatim. The vLLM messages they match (vllm-project/vllm):
/// "No plugins for group %s found." and "Available plugins for group %s:" (`vllm/plugins/__init__.py`),
/// "Automatically detected platform %s." (`vllm/platforms/__init__.py`), "vLLM API server version %s"
/// (`vllm/entrypoints/openai/api_server.py`), "Using max model len %s" (`vllm/config/model.py`), "Waiting for
/// init message from front-end." (`vllm/v1/engine/core.py`), "Starting to load model %s..." and "Model loading
/// took %.4f GiB and %.6f seconds" (`vllm/v1/worker/gpu_model_runner.py`), "Start compiling function %s" and
/// "Dynamo bytecode transform time: %.2f s" (`vllm/compilation/backends.py`), "torch.compile takes %.2f s in
/// total" (`vllm/compilation/monitor.py`), "init engine (profile, create kv cache, warmup model) took %.2f
/// seconds" (`vllm/v1/engine/core.py`), "Starting vLLM API server %d on %s" and "Route: %s, Methods: %s"
/// (`vllm/entrypoints/openai/api_server.py`, `vllm/entrypoints/launcher.py`).
pub const DEFINED_CATEGORIES: &[CategoryDef] = &[
    CategoryDef {
        title: "Detect Platform",
        start: Pattern("No plugins for group"),
        end: Pattern("detected platform"),
        children: &[],
    },
    CategoryDef {
        title: "LLM Imports",
        start: Pattern("detected platform"),
        end: Pattern("Available plugins for group"),
        children: &[],
    },
    CategoryDef {
        title: "Get Model Info",
        start: Pattern("vLLM API server version| version "),
        end: Pattern("Using max model len"),
        children: &[],
    },
    CategoryDef {
        title: "Worker Initialization",
        start: Pattern("Waiting for init message"),
        end: Pattern("Starting to load model"),
        children: &[],
    },
    CategoryDef {
        title: "Model Loading",
        start: Pattern("Starting to load model"),
        end: Pattern("Model loading took"),
        children: &[],
    },
    CategoryDef {
        title: "Pytorch Compilation",
        start: Pattern("Start compiling function|torch/_dynamo"),
        end: Pattern("torch.compile takes"),
        children: &[
            CategoryDef {
                title: "Dynamo",
                start: Pattern("Start compiling function|torch/_dynamo"),
                end: Pattern("Dynamo bytecode transform"),
                children: &[],
            },
            CategoryDef {
                title: "Inductor",
                start: Pattern("Dynamo bytecode transform"),
                end: Pattern("torch.compile takes"),
                children: &[],
            },
        ],
    },
    CategoryDef {
        title: "CUDA Graph Capture",
        start: Pattern("torch.compile takes"),
        end: Pattern("init engine"),
        children: &[],
    },
    CategoryDef {
        title: "API Server Starts",
        start: Pattern("Starting vLLM API server"),
        end: Pattern("Route: /metrics"),
        children: &[],
    },
];

/// Upstream's filler for a gap between two found phases; it is in `categories.log`, not in the result.
pub const UNCATEGORIZED: &str = "Uncategorized";

/// One phase as found.
#[derive(Debug, Clone, PartialEq)]
pub struct Category {
    pub title: String,
    /// False for an [`UNCATEGORIZED`] filler.
    pub defined: bool,
    pub start_pattern: Option<Pattern>,
    pub end_pattern: Option<Pattern>,
    pub start: Option<LogLine>,
    pub end: Option<LogLine>,
    next: Option<usize>,
    first_child: Option<usize>,
}

impl Category {
    /// End minus start in seconds, when both lines were found with a date.
    pub fn elapsed(&self) -> Option<f64> {
        let start = self.start.as_ref()?.timestamp?;
        let end = self.end.as_ref()?.timestamp?;
        Some((end.unix_ms - start.unix_ms) as f64 / 1000.0)
    }

    /// Upstream's `process_desc`: the start line's process, or both when they differ.
    fn process_desc(&self) -> String {
        let desc = |line: &Option<LogLine>| {
            line.as_ref()
                .and_then(|l| l.process.as_ref())
                .map(Process::desc)
                .unwrap_or_default()
        };
        let (start, end) = (desc(&self.start), desc(&self.end));
        if start == end {
            start
        } else {
            format!("{start}, {end}")
        }
    }
}

/// The phases of one log, in upstream's order with its fillers.
#[derive(Debug, Clone, PartialEq)]
pub struct Categories {
    nodes: Vec<Category>,
    root: Option<usize>,
}

/// A found phase as upstream's result file writes it (`BenchmarkCategory._dump`): `process` when both lines were
/// found, `elapsed` 0 when either is missing, the sub-phases under `categories`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryDump {
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    pub elapsed: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<CategoryDump>>,
}

impl Categories {
    /// Finds the phases in `lines`: split by process after upstream's skip marker, then each process's lines
    /// walked in order, then the gaps filled.
    pub fn find(lines: &[LogLine], model: &str) -> Categories {
        let mut categories = Categories {
            nodes: Vec::new(),
            root: None,
        };
        categories.root = categories.add_defined(DEFINED_CATEGORIES);
        for process_lines in lines_per_process(lines, model) {
            let mut index = 0;
            while index < process_lines.len() {
                index = categories.populate(index, &process_lines, categories.root);
                index += 1;
            }
        }
        categories.add_uncategorized(categories.root);
        categories
    }

    fn add_defined(&mut self, defs: &[CategoryDef]) -> Option<usize> {
        let mut first = None;
        let mut previous: Option<usize> = None;
        for def in defs {
            let id = self.nodes.len();
            self.nodes.push(Category {
                title: def.title.to_owned(),
                defined: true,
                start_pattern: Some(def.start),
                end_pattern: Some(def.end),
                start: None,
                end: None,
                next: None,
                first_child: None,
            });
            first.get_or_insert(id);
            if let Some(previous) = previous {
                self.nodes[previous].next = Some(id);
            }
            previous = Some(id);
            if !def.children.is_empty() {
                self.nodes[id].first_child = self.add_defined(def.children);
            }
        }
        first
    }

    /// Upstream's `populate_benchmark_category`: at line `index`, each phase of the chain from `first` takes the
    /// line as its start if it has none and the line matches (forgetting any end found before), then as its end if
    /// it has none and the line matches; a start or end line without a date is replaced by the next dated line,
    /// which moves `index` on for the phases after it.
    ///
    /// Upstream's end branch assigns the next dated line to the category itself (`category.end = log_list[index]`,
    /// a typo for `category.end.log_line`) and then fails on it, losing every phase of the log; this takes the
    /// next dated line, as its start branch does.
    fn populate(&mut self, mut index: usize, lines: &[&LogLine], first: Option<usize>) -> usize {
        let mut current = first;
        while let Some(id) = current {
            if index >= lines.len() {
                break;
            }
            let node = &self.nodes[id];
            if node.start.is_none()
                && node
                    .start_pattern
                    .is_some_and(|p| p.matches(&lines[index].line))
            {
                let node = &mut self.nodes[id];
                node.start = Some(lines[index].clone());
                node.end = None;
                // Upstream keeps the undated line when no dated one follows.
                while lines[index].timestamp.is_none() {
                    index += 1;
                    if index >= lines.len() {
                        return index;
                    }
                    self.nodes[id].start = Some(lines[index].clone());
                }
            }
            let node = &self.nodes[id];
            if node.end.is_none()
                && node
                    .end_pattern
                    .is_some_and(|p| p.matches(&lines[index].line))
            {
                self.nodes[id].end = Some(lines[index].clone());
                while lines[index].timestamp.is_none() {
                    index += 1;
                    if index >= lines.len() {
                        return index;
                    }
                    self.nodes[id].end = Some(lines[index].clone());
                }
            }
            if let Some(child) = self.nodes[id].first_child {
                index = self.populate(index, lines, Some(child));
            }
            current = self.nodes[id].next;
        }
        index
    }

    /// Upstream's `add_uncategorized_categories`: between a phase that ended and the next that started later, an
    /// [`UNCATEGORIZED`] filler from the one to the other.
    fn add_uncategorized(&mut self, first: Option<usize>) {
        let mut current = first;
        while let Some(id) = current {
            if let Some(child) = self.nodes[id].first_child {
                self.add_uncategorized(Some(child));
            }
            let mut after = self.nodes[id].next;
            if let Some(next) = after {
                let end = self.nodes[id].end.clone();
                let next_start = self.nodes[next].start.clone();
                let gap = match (&end, &next_start) {
                    (Some(end), Some(start)) => match (end.timestamp, start.timestamp) {
                        (Some(e), Some(s)) => e < s,
                        _ => false,
                    },
                    _ => false,
                };
                if gap {
                    let filler = self.nodes.len();
                    self.nodes.push(Category {
                        title: UNCATEGORIZED.to_owned(),
                        defined: false,
                        start_pattern: None,
                        end_pattern: None,
                        start: end,
                        end: next_start,
                        next: Some(next),
                        first_child: None,
                    });
                    self.nodes[id].next = Some(filler);
                    // The filler is passed over: the walk goes on at the phase after it.
                    after = Some(next);
                }
            }
            current = after;
        }
    }

    /// Every phase of the chain from `first`, fillers included, with its depth.
    fn walk(&self, first: Option<usize>, depth: usize, out: &mut Vec<(usize, usize)>) {
        let mut current = first;
        while let Some(id) = current {
            out.push((depth, id));
            self.walk(self.nodes[id].first_child, depth + 1, out);
            current = self.nodes[id].next;
        }
    }

    /// Every phase with its depth, in upstream's order, fillers included.
    pub fn all(&self) -> Vec<(usize, &Category)> {
        let mut ids = Vec::new();
        self.walk(self.root, 0, &mut ids);
        ids.into_iter()
            .map(|(d, id)| (d, &self.nodes[id]))
            .collect()
    }

    /// The top-level defined phases, in order (no fillers).
    pub fn top_level(&self) -> Vec<&Category> {
        let mut out = Vec::new();
        let mut current = self.root;
        while let Some(id) = current {
            if self.nodes[id].defined {
                out.push(&self.nodes[id]);
            }
            current = self.nodes[id].next;
        }
        out
    }

    /// Whether any phase found a start or an end line.
    pub(crate) fn any_found(&self) -> bool {
        self.nodes
            .iter()
            .any(|c| c.defined && (c.start.is_some() || c.end.is_some()))
    }

    /// The defined phases as the result file lists them (upstream's `dump()`: fillers left out).
    pub fn dump(&self) -> Vec<CategoryDump> {
        self.dump_chain(self.root)
    }

    fn dump_chain(&self, first: Option<usize>) -> Vec<CategoryDump> {
        let mut out = Vec::new();
        let mut current = first;
        while let Some(id) = current {
            let node = &self.nodes[id];
            if node.defined {
                let process = match (&node.start, &node.end) {
                    (Some(start), Some(end)) => {
                        start.process.clone().or_else(|| end.process.clone())
                    }
                    _ => None,
                };
                out.push(CategoryDump {
                    title: node.title.clone(),
                    process,
                    elapsed: node.elapsed().unwrap_or(0.0),
                    categories: node.first_child.map(|child| self.dump_chain(Some(child))),
                });
            }
            current = node.next;
        }
        out
    }

    /// `categories.log`, as upstream's `write_benchmark_categories_to_log` writes it.
    pub fn log_text(&self) -> String {
        let mut out = String::new();
        for (depth, category) in self.all() {
            let pad = "  ".repeat(depth);
            let elapsed = category
                .elapsed()
                .map(|e| format!("{e:.3}"))
                .unwrap_or_default();
            let date = |line: &Option<LogLine>| {
                line.as_ref()
                    .and_then(|l| l.timestamp)
                    .map(|t| t.month_day_time())
                    .unwrap_or_default()
            };
            let pattern = |p: Option<Pattern>| p.map(|p| p.0).unwrap_or_default();
            let source = |line: &Option<LogLine>| match line {
                Some(l) => format!(" {} '{}'", l.line_number, l.line),
                None => String::new(),
            };
            // Writing to a String cannot fail.
            let _ = write!(
                out,
                "\n{pad}Log category   : '{}'\n{pad}  Process      : '{}'\n{pad}  Start date   : '{}'\n\
                 {pad}  End date     : '{}'\n{pad}  Elapsed      : {elapsed}\n{pad}  Start pattern: '{}'\n\
                 {pad}  End pattern  : '{}'\n{pad}  Start line   :{}\n{pad}  End line     :{}\n",
                category.title,
                category.process_desc(),
                date(&category.start),
                date(&category.end),
                pattern(category.start_pattern),
                pattern(category.end_pattern),
                source(&category.start),
                source(&category.end),
            );
        }
        out
    }
}

/// Upstream's `get_log_list_per_process`: the lines after the first "End model <model> serialization" (a
/// tensorizer pass before the real start) or "Uvicorn running" (a launcher's server before the vLLM it starts),
/// grouped by process in order of first appearance (lines of no process form a group too). A marker on the last
/// line leaves nothing.
fn lines_per_process<'a>(lines: &'a [LogLine], model: &str) -> Vec<Vec<&'a LogLine>> {
    let serialization_end = format!("End model {model} serialization");
    let skip = lines
        .iter()
        .find(|l| l.line.contains(&serialization_end) || l.line.contains("Uvicorn running"))
        .map_or(0, |l| l.line_number);
    if skip >= lines.len() && skip > 0 {
        return Vec::new();
    }
    let mut groups: Vec<(Option<&Process>, Vec<&LogLine>)> = Vec::new();
    for line in &lines[skip..] {
        match groups.iter_mut().find(|(p, _)| *p == line.process.as_ref()) {
            Some((_, group)) => group.push(line),
            None => groups.push((line.process.as_ref(), vec![line])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}
