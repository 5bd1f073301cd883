use serde_json::json;

use super::*;

fn event(ty: &str, data: Value) -> Result<RuntimeEvent, Mismatch> {
    RuntimeEvent::parse(json!({"sessionId": "s1", "event": {"id": "e", "type": ty, "data": data}}))
        .map(|a| {
            assert_eq!(a.session_id, "s1");
            assert_eq!(a.id.as_deref(), Some("e"), "the event's id is kept");
            a.event
        })
}

#[test]
fn events_are_typed() {
    assert_eq!(
        event(
            "assistant.message_delta",
            json!({"messageId": "m", "deltaContent": "He"})
        ),
        Ok(RuntimeEvent::MessageDelta {
            message_id: "m".into(),
            delta: "He".into()
        })
    );
    assert_eq!(
        event(
            "tool.execution_complete",
            json!({"toolCallId": "c", "success": true, "result": {"content": "ok"}, "toolTelemetry": {"new": 1}})
        ),
        Ok(RuntimeEvent::ToolCompleted {
            tool_call_id: "c".into(),
            success: true,
            output: "ok".into()
        })
    );
    let Ok(RuntimeEvent::PermissionRequested(p)) = event(
        "permission.requested",
        json!({"requestId": "r", "permissionRequest": {"kind": "shell", "toolCallId": "c", "fullCommandText": "ls"}}),
    ) else {
        panic!("a permission request")
    };
    assert_eq!((p.request_id.as_str(), p.kind.as_str()), ("r", "shell"));
    assert_eq!(p.full_command_text.as_deref(), Some("ls"));
    assert_eq!(
        event("session.start", json!({"anything": true})),
        Ok(RuntimeEvent::Other("session.start".into()))
    );
    // The model layer's own events, in no schema.
    assert_eq!(
        event("model.tool_execution", json!({})),
        Ok(RuntimeEvent::Other("model.tool_execution".into()))
    );
    let Ok(RuntimeEvent::McpServers(s)) = event(
        "session.mcp_server_status_changed",
        json!({"serverName": "echo", "status": "a-status-of-tomorrow"}),
    ) else {
        panic!("a server's status")
    };
    assert_eq!(s[0].status, "a-status-of-tomorrow");
}

#[test]
fn what_is_not_as_the_schema_says_is_a_mismatch_not_a_default() {
    let e = event("assistant.message_delta", json!({"messageId": "m"})).unwrap_err();
    assert_eq!(e.kind, MismatchKind::MissingField);
    assert_eq!(e.place, "assistant.message_delta");
    assert!(e.detail.contains("deltaContent"), "{}", e.detail);
    let e = event(
        "tool.execution_complete",
        json!({"toolCallId": "c", "success": "secret prompt text"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, MismatchKind::WrongType);
    assert!(e.detail.starts_with("success"), "{}", e.detail);
    assert!(!e.detail.contains("secret"), "no content: {}", e.detail);
    let e = event("session.error", json!({})).unwrap_err();
    assert_eq!(e.kind, MismatchKind::MissingField);
    let e = event("x.future", json!({})).unwrap_err();
    assert_eq!(e.kind, MismatchKind::UnknownEvent);
    let e = RuntimeEvent::parse(json!({"event": {"type": "session.idle"}})).unwrap_err();
    assert_eq!(e.kind, MismatchKind::MissingField);
    assert!(e.detail.contains("sessionId"), "{}", e.detail);
}

#[test]
fn the_schema_names_the_event_types_sorted() {
    assert!(s::EVENT_TYPES.windows(2).all(|w| w[0] < w[1]));
    for t in ["session.idle", "user.message", "assistant.message_delta"] {
        assert!(s::EVENT_TYPES.binary_search(&t).is_ok(), "{t}");
    }
}
