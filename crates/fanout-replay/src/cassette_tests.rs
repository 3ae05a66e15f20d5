use super::*;
use crate::identity::Identity;

fn root(text: &str) -> ContentRoot {
    ContentRoot::of_text(text.to_string())
}

fn identity(rung: IdentityRung, key: &str, parent: Option<usize>) -> RecordedIdentity {
    RecordedIdentity {
        rung,
        key: key.to_string(),
        parent,
    }
}

fn conversation(
    name: &str,
    identity: Option<usize>,
    root_text: &str,
    steps: &[usize],
    span: (u64, u64),
) -> RecordedConversation {
    RecordedConversation {
        name: name.to_string(),
        identity,
        endpoint: "POST /v1/messages".to_string(),
        root: Some(root(root_text)),
        steps: steps.iter().map(|s| Some(*s)).collect(),
        span: Span {
            start_ms: span.0,
            end_ms: span.1,
        },
    }
}

fn live(rung: IdentityRung, key: &str, parent: Option<&str>) -> Identity {
    Identity {
        rung,
        key: format!("{}:{key}", rung.as_str()),
        parent: parent.map(|p| format!("{}:{p}", IdentityRung::ClaudeSession.as_str())),
    }
}

/// A parent (claude-session) and three concurrent children (claude-agent),
/// two exchanges each, with distinct roots.
fn family() -> CassetteScripts {
    use IdentityRung::*;
    CassetteScripts::new(
        vec![
            identity(ClaudeSession, "claude-session:S", None),
            identity(ClaudeAgent, "claude-agent:A", Some(0)),
            identity(ClaudeAgent, "claude-agent:B", Some(0)),
            identity(ClaudeAgent, "claude-agent:C", Some(0)),
        ],
        vec![
            conversation("parent", Some(0), "P", &[0, 1], (0, 100)),
            conversation("child-a", Some(1), "A", &[0, 1], (10, 50)),
            conversation("child-b", Some(2), "B", &[0, 1], (11, 60)),
            conversation("child-c", Some(3), "C", &[0, 1], (12, 70)),
        ],
    )
    .unwrap()
}

/// Every distinct ordering of a multiset (counts per caller).
fn orderings(counts: &mut Vec<usize>, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    if counts.iter().all(|c| *c == 0) {
        out.push(prefix.clone());
        return;
    }
    for caller in 0..counts.len() {
        if counts[caller] > 0 {
            counts[caller] -= 1;
            prefix.push(caller);
            orderings(counts, prefix, out);
            prefix.pop();
            counts[caller] += 1;
        }
    }
}

/// Every order of the parent's second call and the children's six calls after
/// the parent's first call (which spawns them): 7!/(2!2!2!) = 630 orders.
fn family_orders() -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    orderings(&mut vec![1, 2, 2, 2], &mut vec![0], &mut out);
    out
}

#[test]
fn a_parent_and_three_children_interleaved_in_every_order() {
    let orders = family_orders();
    assert_eq!(orders.len(), 630);
    let roots: Vec<ContentRoot> = ["P", "A", "B", "C"].iter().map(|t| root(t)).collect();
    for order in &orders {
        let binding = CassetteBinding::new(family());
        let callers = [
            live(IdentityRung::ClaudeSession, "live-S", None),
            live(IdentityRung::ClaudeAgent, "live-A", Some("live-S")),
            live(IdentityRung::ClaudeAgent, "live-B", Some("live-S")),
            live(IdentityRung::ClaudeAgent, "live-C", Some("live-S")),
        ];
        let mut calls = [0usize; 4];
        for &who in order {
            let request = LiveRequest {
                label: "r",
                identity: Some(&callers[who]),
                endpoint: "POST /v1/messages",
                root: Some(&roots[who]),
                step: Some(calls[who]),
            };
            let served = binding
                .bind(&request)
                .unwrap_or_else(|miss| panic!("{order:?}: {miss}"));
            assert_eq!(
                (served.conversation, served.exchange),
                (who, calls[who]),
                "order {order:?}"
            );
            calls[who] += 1;
        }
        assert!(binding.finished(), "{order:?}");
        assert_eq!(binding.bound_identities().len(), 4);
    }
}

#[test]
fn header_less_conversations_bind_by_root_in_every_order() {
    let scripts = CassetteScripts::new(
        Vec::new(),
        vec![
            conversation("parent", None, "P", &[0, 1], (0, 100)),
            conversation("child-a", None, "A", &[0, 1], (10, 50)),
            conversation("child-b", None, "B", &[0, 1], (11, 60)),
            conversation("child-c", None, "C", &[0, 1], (12, 70)),
        ],
    )
    .unwrap();
    let roots: Vec<ContentRoot> = ["P", "A", "B", "C"].iter().map(|t| root(t)).collect();
    for order in family_orders() {
        let binding = CassetteBinding::new(scripts.clone());
        let mut calls = [0usize; 4];
        for &who in &order {
            let served = binding
                .bind(&LiveRequest {
                    label: "r",
                    identity: None,
                    endpoint: "POST /v1/messages",
                    root: Some(&roots[who]),
                    step: Some(calls[who]),
                })
                .unwrap();
            assert_eq!(
                (served.conversation, served.exchange, served.rung),
                (who, calls[who], Rung::Content)
            );
            calls[who] += 1;
        }
    }
}

fn sequential_children(listed: [usize; 2]) -> CassetteScripts {
    use IdentityRung::*;
    let children = [
        (
            identity(FanoutSession, "fanout-session:X", None),
            "X",
            (20, 30),
        ),
        (
            identity(FanoutSession, "fanout-session:Y", None),
            "Y",
            (40, 50),
        ),
    ];
    let mut identities = vec![identity(FanoutSession, "fanout-session:P", None)];
    let mut conversations = vec![conversation("parent", Some(0), "P", &[0], (0, 60))];
    for (at, &child) in listed.iter().enumerate() {
        let (recorded, text, span) = &children[child];
        identities.push(recorded.clone());
        conversations.push(conversation(
            &format!("child-{text}"),
            Some(at + 1),
            text,
            &[0],
            *span,
        ));
    }
    // The parent overlaps both; the children are sequential.
    CassetteScripts::new(identities, conversations).unwrap()
}

fn fanout(key: &str) -> Identity {
    Identity {
        rung: IdentityRung::FanoutSession,
        key: format!("fanout-session:{key}"),
        parent: None,
    }
}

#[test]
fn sequential_siblings_keep_their_order_and_a_reordering_is_a_loud_miss() {
    let (p, x, y) = (fanout("live-p"), fanout("live-x"), fanout("live-y"));
    let (rp, rx, ry) = (root("P"), root("X"), root("Y"));
    let bind = |binding: &CassetteBinding, who: &Identity, r: &ContentRoot| {
        binding.bind(&LiveRequest {
            label: "request 2 (POST /v1/messages)",
            identity: Some(who),
            endpoint: "POST /v1/messages",
            root: Some(r),
            step: Some(0),
        })
    };
    let recorded = CassetteBinding::new(sequential_children([0, 1]));
    bind(&recorded, &p, &rp).unwrap();
    assert_eq!(bind(&recorded, &x, &rx).unwrap().conversation, 1);
    assert_eq!(bind(&recorded, &y, &ry).unwrap().conversation, 2);

    let reordered = CassetteBinding::new(sequential_children([1, 0]));
    bind(&reordered, &p, &rp).unwrap();
    let miss = bind(&reordered, &x, &rx).unwrap_err();
    assert_eq!(miss.reason, MissReason::NoConversation);
    let closest = miss.closest.clone().unwrap();
    assert_eq!(closest.conversation, "child-Y");
    assert_eq!(closest.difference.as_ref().unwrap().at, 0);
    assert!(
        miss.to_string()
            .starts_with("request 2 (POST /v1/messages) (fanout-session:live-x, root sha256:")
            && miss
                .to_string()
                .contains("by rung fanout-session: no recorded conversation")
            && miss
                .to_string()
                .contains("closest recorded: child-Y (fanout-session"),
        "{miss}"
    );
    assert_eq!(reordered.misses(), vec![*miss]);
}

#[test]
fn concurrent_siblings_listed_in_another_order_still_bind_by_content() {
    use IdentityRung::*;
    let scripts = CassetteScripts::new(
        vec![
            identity(ClaudeSession, "claude-session:S", None),
            identity(ClaudeAgent, "claude-agent:B", Some(0)),
            identity(ClaudeAgent, "claude-agent:A", Some(0)),
        ],
        vec![
            conversation("parent", Some(0), "P", &[0], (0, 100)),
            conversation("child-b", Some(1), "B", &[0], (11, 60)),
            conversation("child-a", Some(2), "A", &[0], (10, 50)),
        ],
    )
    .unwrap();
    let binding = CassetteBinding::new(scripts);
    let (s, a, b) = (
        live(ClaudeSession, "s", None),
        live(ClaudeAgent, "a", Some("s")),
        live(ClaudeAgent, "b", Some("s")),
    );
    for (who, text, want) in [(&s, "P", 0), (&a, "A", 2), (&b, "B", 1)] {
        let r = root(text);
        let served = binding
            .bind(&LiveRequest {
                label: "r",
                identity: Some(who),
                endpoint: "POST /v1/messages",
                root: Some(&r),
                step: Some(0),
            })
            .unwrap();
        assert_eq!(served.conversation, want);
        assert_eq!(served.rung, Rung::Identity(who.rung));
    }
}

#[test]
fn same_root_conversations_of_one_identity_and_retries_go_by_step() {
    use IdentityRung::*;
    let scripts = CassetteScripts::new(
        vec![identity(ClaudeSession, "claude-session:S", None)],
        vec![
            // A call that failed and was retried at the same step, then step 1.
            conversation("main", Some(0), "M", &[0, 0, 1], (0, 100)),
            // Two one-shot checks with one root.
            conversation("check-1", Some(0), "K", &[0], (5, 6)),
            conversation("check-2", Some(0), "K", &[0], (7, 8)),
        ],
    )
    .unwrap();
    let binding = CassetteBinding::new(scripts);
    let s = live(ClaudeSession, "s", None);
    let (m, k) = (root("M"), root("K"));
    let bind = |r: &ContentRoot, step: usize| {
        binding
            .bind(&LiveRequest {
                label: "r",
                identity: Some(&s),
                endpoint: "POST /v1/messages",
                root: Some(r),
                step: Some(step),
            })
            .map(|served| (served.conversation, served.exchange))
    };
    assert_eq!(bind(&m, 0), Ok((0, 0)));
    assert_eq!(bind(&k, 0), Ok((1, 0)));
    assert_eq!(bind(&m, 0), Ok((0, 1)));
    assert_eq!(bind(&k, 0), Ok((2, 0)));
    assert_eq!(bind(&m, 1), Ok((0, 2)));
    let exhausted = bind(&m, 2).unwrap_err();
    assert_eq!(
        exhausted.reason,
        MissReason::Exhausted {
            conversation: "main".into(),
            recorded: 3
        }
    );
    assert!(binding.finished());
}

#[test]
fn misses_consume_nothing_and_name_what_they_tried() {
    use IdentityRung::*;
    let binding = CassetteBinding::new(family());
    let s = live(ClaudeSession, "s", None);
    let orphan = Identity {
        rung: ClaudeAgent,
        key: "claude-agent:orphan".into(),
        parent: Some("claude-session:never-called".into()),
    };
    let (p, a) = (root("P"), root("A"));
    let request = |who: &'static str, identity: Option<&Identity>, r: &ContentRoot, step: usize| {
        binding.bind(&LiveRequest {
            label: who,
            identity,
            endpoint: "POST /v1/messages",
            root: Some(r),
            step: Some(step),
        })
    };
    // A child whose parent never called: no recorded agent is a root.
    let miss = request("orphan", Some(&orphan), &a, 0).unwrap_err();
    assert_eq!(miss.reason, MissReason::NoIdentity { recorded: 0 });
    // The parent at a step its conversation does not have next.
    request("p0", Some(&s), &p, 0).unwrap();
    let skip = request("p5", Some(&s), &p, 5).unwrap_err();
    assert_eq!(
        skip.reason,
        MissReason::StepMismatch {
            conversation: "parent".into(),
            expected: Some(1),
            got: Some(5)
        }
    );
    assert!(
        skip.to_string()
            .contains("parent's next exchange is at step 1 but the request is at step 5"),
        "{skip}"
    );
    // Nothing was consumed: step 1 is still there.
    assert_eq!(request("p1", Some(&s), &p, 1).map(|s| s.exchange), Ok(1));
    // A header-less request finds no header-less conversation.
    let content = request("anon", None, &p, 0).unwrap_err();
    assert_eq!(
        (content.rung, content.reason),
        (Rung::Content, MissReason::NoConversation)
    );
    assert_eq!(binding.misses().len(), 3);
    assert_eq!(binding.progress(), vec![2, 0, 0, 0]);
}

#[test]
fn the_closest_conversation_shows_where_the_roots_differ() {
    let scripts = CassetteScripts::new(
        Vec::new(),
        vec![
            conversation(
                "far",
                None,
                "system:\nsomething else entirely",
                &[0],
                (0, 1),
            ),
            conversation(
                "near",
                None,
                "system:\nYou are Claude. Today is <date>.\n\nuser:\nhi",
                &[0],
                (0, 1),
            ),
        ],
    )
    .unwrap();
    let binding = CassetteBinding::new(scripts);
    let changed = root("system:\nYou are Claude. Today is Tuesday.\n\nuser:\nhi");
    let miss = binding
        .bind(&LiveRequest {
            label: "request 1 (POST /v1/messages)",
            identity: None,
            endpoint: "POST /v1/messages",
            root: Some(&changed),
            step: Some(0),
        })
        .unwrap_err();
    let closest = miss.closest.unwrap();
    assert_eq!(closest.conversation, "near");
    let difference = closest.difference.unwrap();
    assert_eq!(difference.at, 33);
    assert!(
        difference.live.ends_with("Tuesday.\n\nuser:\nhi"),
        "{difference:?}"
    );
    assert!(difference.recorded.contains("<date>"), "{difference:?}");
}

#[test]
fn references_out_of_range_and_empty_conversations_are_refused() {
    let bad = CassetteScripts::new(
        vec![identity(
            IdentityRung::CodexThread,
            "codex-thread:T",
            Some(4),
        )],
        Vec::new(),
    )
    .unwrap_err();
    assert_eq!(
        bad.to_string(),
        "identity codex-thread:T refers to identity 4, but only 1 are recorded"
    );
    let empty = CassetteScripts::new(Vec::new(), vec![conversation("c", None, "x", &[], (0, 0))])
        .unwrap_err();
    assert_eq!(empty.to_string(), "c records no exchange");
}
