//! The terminal view of one session (`fanout show`): a header, then per turn its
//! invocations as a box-drawn tree (type, description, status, duration, tokens, cost
//! own / with descendants, flags) and the turn's text timeline, fitted to the width.
//! Colour only when asked for (a TTY without `NO_COLOR`); every text is cleaned.

use fanout_store::{InvocationNode, SessionView, TurnView};
use unicode_width::UnicodeWidthStr;

use super::timeline::{fit, label, layout, render_text, wrap};
use super::{clean, duration, harness, millis_between, tokens, unpriced_models, usd, when};

/// How to draw.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// Columns available.
    pub width: usize,
    /// ANSI colour.
    pub colour: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Whether colour is wanted on stdout: a terminal, and `NO_COLOR` unset or empty.
pub fn colour_wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The whole view; `turn` keeps one turn (1-based).
pub fn render(view: &SessionView, turn: Option<usize>, style: Style) -> String {
    let s = &view.session;
    let mut out = Vec::new();
    out.push(style.paint("1", &format!("session {}", s.id)));
    out.push(format!(
        "  {} · task {} · started {} · {} turn(s) · {} subagent(s) ({} async, {} unsettled)",
        harness(s),
        clean(&s.task_id),
        when(s.started_at),
        s.turns,
        view.invocations,
        view.async_invocations,
        view.unsettled_invocations
    ));
    if let Some(acp) = &s.acp_session_id {
        out.push(format!("  harness session {}", clean(acp)));
    }
    let u = &view.usage;
    let share = |v: Option<f64>| {
        v.map(|v| format!("{:.0}%", v * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    out.push(format!(
        "  usage: {} tokens in {} response(s), cost {} · subagents {} tokens, {} ({} of tokens, {} of cost)",
        tokens(u.total.total_tokens()),
        u.total.tokens.responses,
        usd(&u.total.cost),
        tokens(u.subagents.total_tokens()),
        usd(&u.subagents.cost),
        share(u.subagent_token_share),
        share(u.subagent_cost_share),
    ));
    if u.total.cost.has_unpriced() {
        out.push(style.paint(
            "33",
            &format!(
                "  unpriced: {} response(s) of {} (no price known; never counted as $0; add them with --prices FILE)",
                u.total.cost.unpriced_responses,
                unpriced_models(&u.total.cost)
            ),
        ));
    }
    if view.turns.is_empty() {
        out.push(String::new());
        out.push("  (this session has no turns and no subagents)".to_owned());
    }
    for t in &view.turns {
        if turn.is_some_and(|n| n != t.number) {
            continue;
        }
        out.push(String::new());
        out.extend(render_turn(t, style));
    }
    let mut text = String::new();
    for line in out {
        for piece in wrap(&line, style.width) {
            text.push_str(&piece);
            text.push('\n');
        }
    }
    text
}

fn render_turn(t: &TurnView, style: Style) -> Vec<String> {
    let mut out = Vec::new();
    let heading = match &t.turn {
        Some(turn) => {
            let length = turn
                .completed_at
                .map(|end| duration(millis_between(turn.started_at, end)))
                .unwrap_or_else(|| "running".to_owned());
            format!(
                "turn {} · {} · {} · {} · {} tokens · {}",
                t.number,
                when(turn.started_at),
                length,
                turn.stop_reason
                    .as_deref()
                    .map(clean)
                    .unwrap_or_else(|| "-".into()),
                tokens(t.usage.total_tokens()),
                usd(&t.usage.cost)
            )
        }
        None => format!(
            "(no known turn) · {} tokens · {}",
            tokens(t.usage.total_tokens()),
            usd(&t.usage.cost)
        ),
    };
    out.push(style.paint("1", &heading));
    if t.invocations.is_empty() {
        out.push("  (no subagents)".to_owned());
        return out;
    }
    let count = t.invocations.len();
    for (i, node) in t.invocations.iter().enumerate() {
        tree_lines(node, "", i + 1 == count, style, &mut out);
    }
    out.push(String::new());
    out.push(format!("timeline of turn {}", t.number));
    out.extend(render_text(&layout(t), style.width));
    out
}

fn tree_lines(
    node: &InvocationNode,
    prefix: &str,
    last: bool,
    style: Style,
    out: &mut Vec<String>,
) {
    let branch = if last { "└─ " } else { "├─ " };
    let row = &node.row;
    let super::Facts {
        status,
        duration: length,
        flags,
    } = super::facts(node);
    let measured = tokens(node.own.total_tokens());
    let reported = row
        .total_tokens
        .map(|t| format!(" (reported {})", tokens(Some(t))))
        .unwrap_or_default();
    let cost = if node.children.is_empty() {
        usd(&node.own.cost)
    } else {
        format!(
            "{} / {}",
            usd(&node.own.cost),
            usd(&node.with_descendants.cost)
        )
    };
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", flags.join(", "))
    };
    let figures = format!("{status} · {length} · {measured} tok{reported} · {cost}");
    let lead = format!("{prefix}{branch}");
    let room = style
        .width
        .saturating_sub(lead.width() + flags.width())
        .max(16);
    let name = label(row.subagent_type.as_deref(), row.description.as_deref());
    let name = if name.width() > room {
        fit(&name, room).trim_end().to_owned()
    } else {
        name
    };
    let status_code = match status.as_str() {
        "completed" => "32",
        "failed" | "cancelled" => "31",
        _ => "33",
    };
    let painted = if style.colour {
        figures.replacen(&status, &style.paint(status_code, &status), 1)
    } else {
        figures.clone()
    };
    let head = format!(
        "{lead}{}{}",
        style.paint("1", &name),
        style.paint("2", &flags)
    );
    let one_line = lead.width() + name.width() + flags.width() + 3 + figures.width();
    if one_line <= style.width {
        out.push(format!("{head} · {painted}"));
    } else {
        // The figures on their own line, under the name, keeping the tree's rails.
        let rail = format!(
            "{prefix}{}{}",
            if last { "   " } else { "│  " },
            if node.children.is_empty() {
                "   "
            } else {
                "│  "
            }
        );
        out.push(head);
        out.push(format!("{rail}{painted}"));
    }
    let child_prefix = format!("{prefix}{}", if last { "   " } else { "│  " });
    let count = node.children.len();
    for (i, child) in node.children.iter().enumerate() {
        tree_lines(child, &child_prefix, i + 1 == count, style, out);
    }
}
