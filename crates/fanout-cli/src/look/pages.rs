//! The HTML pages — the sessions list, one session (tree and SVG timeline) and the
//! report — from one set of minijinja templates (`templates/`, compiled into the
//! binary), shared by `show --html`, `report --html` and the web UI of `fanout serve`.
//! Pages written to a file are self-contained (inline CSS and SVG, no script); served
//! pages add a small script for live updates. Autoescaping is on for every template,
//! so text from the database can never become markup.

use anyhow::{Context, Result};
use fanout_store::{PriceTable, SessionView, TurnView, Usage, UsageReport};
use minijinja::{Environment, Value, context};
use serde::Serialize;

use super::timeline::layout;
use super::{
    SessionLine, clean, duration, harness, millis_between, provenance, tokens, unpriced_models,
    usd, when,
};

/// The compiled templates.
pub struct Pages {
    env: Environment<'static>,
}

/// What a served page adds: live updates and the navigation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Live {
    /// The filters of the sessions list, echoed into its form.
    pub filters: Filters,
    /// Every harness seen, for the filter's choices.
    pub harnesses: Vec<String>,
}

/// The sessions list's filters, as typed.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Filters {
    /// Task id.
    #[serde(default)]
    pub task: String,
    /// Harness name.
    #[serde(default)]
    pub harness: String,
    /// `YYYY-MM-DD`, inclusive.
    #[serde(default)]
    pub since: String,
    /// `YYYY-MM-DD`, exclusive.
    #[serde(default)]
    pub until: String,
}

impl Pages {
    /// Compiles the templates.
    pub fn new() -> Result<Pages> {
        let mut env = Environment::new();
        for (name, text) in [
            ("base.html", include_str!("../../templates/base.html")),
            (
                "sessions.html",
                include_str!("../../templates/sessions.html"),
            ),
            ("session.html", include_str!("../../templates/session.html")),
            ("report.html", include_str!("../../templates/report.html")),
        ] {
            env.add_template(name, text)
                .with_context(|| format!("compiling the template {name}"))?;
        }
        Ok(Pages { env })
    }

    fn render(&self, name: &str, ctx: Value) -> Result<String> {
        self.env
            .get_template(name)
            .and_then(|t| t.render(ctx))
            .with_context(|| format!("rendering {name}"))
    }

    /// The sessions list; `live` for the served page (links, filters, script).
    pub fn sessions_page(
        &self,
        lines: &[SessionLine],
        prices: &PriceTable,
        live: Option<&Live>,
    ) -> Result<String> {
        let sessions: Vec<Value> = lines
            .iter()
            .map(|l| {
                let s = &l.session;
                context! {
                    id => s.id,
                    short_id => s.id.chars().take(12).collect::<String>(),
                    href => format!("/sessions/{}", s.id),
                    harness => l.harness,
                    task => clean(&s.task_id),
                    started => when(s.started_at),
                    turns => s.turns,
                    subagents => l.subagents,
                    async_subagents => l.async_subagents,
                    unsettled_subagents => l.unsettled_subagents,
                    tokens => tokens(l.usage.total_tokens()),
                    cost => usd(&l.usage.cost),
                    unpriced => l.usage.cost.has_unpriced(),
                    source => l.source,
                }
            })
            .collect();
        self.render(
            "sessions.html",
            context! {
                live => live.is_some(),
                filters => live.map(|l| l.filters.clone()).unwrap_or_default(),
                harnesses => live.map(|l| l.harnesses.clone()).unwrap_or_default(),
                subtitle => "sessions",
                sessions,
                prices_taken_on => prices.taken_on,
            },
        )
    }

    /// One session: header, usage, and per turn the tree and the SVG timeline.
    pub fn session_page(
        &self,
        view: &SessionView,
        prices: &PriceTable,
        live: Option<&Live>,
    ) -> Result<String> {
        let s = &view.session;
        let u = &view.usage;
        let share = |v: Option<f64>| {
            v.map(|v| format!("{:.0}%", v * 100.0))
                .unwrap_or_else(|| "-".into())
        };
        let header = context! {
            id => s.id,
            short_id => s.id.chars().take(12).collect::<String>(),
            harness => harness(s),
            source => provenance(s),
            task => clean(&s.task_id),
            started => when(s.started_at),
            turns => s.turns,
            harness_session => s.acp_session_id.as_deref().map(clean),
            subagents => view.invocations,
            async_subagents => view.async_invocations,
            unsettled_subagents => view.unsettled_invocations,
            usage => vec![
                usage_row("session total", &u.total),
                usage_row("own agent", &u.own_agent),
                usage_row("subagents", &u.subagents),
            ],
            token_share => share(u.subagent_token_share),
            cost_share => share(u.subagent_cost_share),
            unpriced => if u.total.cost.has_unpriced() {
                Some(format!("{} response(s) of {}", u.total.cost.unpriced_responses, unpriced_models(&u.total.cost)))
            } else { None },
        };
        let turns: Vec<Value> = view.turns.iter().map(turn_context).collect();
        self.render(
            "session.html",
            context! {
                live => live.is_some(),
                subtitle => format!("session {}", s.id),
                s => header,
                turns,
                prices_taken_on => prices.taken_on,
            },
        )
    }

    /// The usage report, with the fan-out report's sections (already escaped) after it.
    pub fn report_page(
        &self,
        report: &UsageReport,
        scope: &str,
        fanout_fragment: Option<String>,
        live: bool,
    ) -> Result<String> {
        let t = &report.total;
        let share = |v: Option<f64>| {
            v.map(|v| format!("{:.0}%", v * 100.0))
                .unwrap_or_else(|| "-".into())
        };
        let total = context! {
            tokens => tokens(t.total.total_tokens()),
            responses => t.total.tokens.responses,
            cost => usd(&t.total.cost),
            sub_tokens => tokens(t.subagents.total_tokens()),
            sub_cost => usd(&t.subagents.cost),
            token_share => share(t.subagent_token_share),
            cost_share => share(t.subagent_cost_share),
            unpriced => if t.total.cost.has_unpriced() {
                Some(format!("{} response(s) of {}", t.total.cost.unpriced_responses, unpriced_models(&t.total.cost)))
            } else { None },
        };
        let sections = crate::report::usage::sections(report)
            .into_iter()
            .map(|section| {
                let rows: Vec<Value> = section
                    .rows
                    .iter()
                    .map(|row| context! {
                        cells => row.cells,
                        link => row.session.as_ref().filter(|_| live).map(|id| format!("/sessions/{id}")),
                    })
                    .collect();
                context! { title => section.title, class => section.key, header => section.header, rows }
            })
            .collect::<Vec<_>>();
        self.render(
            "report.html",
            context! {
                live,
                subtitle => "report",
                scope,
                prices_taken_on => report.prices_taken_on,
                price_sources => report.price_sources,
                total,
                sections,
                fanout => fanout_fragment,
            },
        )
    }
}

fn usage_row(who: &str, u: &Usage) -> Value {
    let t = &u.tokens.tokens;
    context! {
        who,
        responses => u.tokens.responses,
        input => tokens(t.input_tokens),
        output => tokens(t.output_tokens),
        cache_write => tokens(t.cache_creation_tokens),
        cache_read => tokens(t.cache_read_tokens),
        reasoning => tokens(t.reasoning_tokens),
        cost => usd(&u.cost),
    }
}

fn turn_context(t: &TurnView) -> Value {
    let heading = match &t.turn {
        Some(turn) => format!(
            "Turn {} · {} · {} · {} tokens · {}",
            t.number,
            when(turn.started_at),
            turn.completed_at
                .map(|end| duration(millis_between(turn.started_at, end)))
                .unwrap_or_else(|| "running".into()),
            tokens(t.usage.total_tokens()),
            usd(&t.usage.cost)
        ),
        None => format!(
            "No known turn · {} tokens · {}",
            tokens(t.usage.total_tokens()),
            usd(&t.usage.cost)
        ),
    };
    let rows: Vec<Value> = t
        .all_invocations()
        .into_iter()
        .map(|node| {
            let row = &node.row;
            let facts = super::facts(node);
            context! {
                tool_call_id => row.tool_call_id,
                depth => node.depth,
                kind => row.subagent_type.as_deref().map(clean).unwrap_or_else(|| "(untyped)".into()),
                description => row.description.as_deref().map(clean).unwrap_or_default(),
                model => row.model.as_deref().map(clean).unwrap_or_else(|| "-".into()),
                status => facts.status,
                duration => facts.duration,
                tokens => tokens(node.own.total_tokens()),
                reported => tokens(row.total_tokens),
                cost_own => usd(&node.own.cost),
                cost_total => usd(&node.with_descendants.cost),
                flags => facts.flags,
            }
        })
        .collect();
    let timeline = layout(t);
    let bars: Vec<Value> = timeline
        .bars
        .iter()
        .map(|b| {
            let tip = if b.open {
                format!(
                    "from +{} to the turn's end (never settled)",
                    duration(b.start_ms)
                )
            } else {
                format!("+{} to +{}", duration(b.start_ms), duration(b.end_ms))
            };
            context! {
                tool_call_id => b.tool_call_id,
                label => b.label,
                short_label => super::timeline::fit(&b.label, 44).trim_end(),
                depth => b.depth,
                open => b.open,
                x_pct => b.x_pct,
                w_pct => b.w_pct,
                tip,
            }
        })
        .collect();
    context! {
        number => t.number,
        heading,
        rows,
        bars,
        span => duration(timeline.span_ms),
        svg_height => 24 + 20 * timeline.bars.len(),
    }
}
