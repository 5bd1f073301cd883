use serde_json::json;

use super::*;

fn wire<P: Serialize>(p: &P) -> serde_json::Value {
    serde_json::to_value(p).unwrap()
}

#[test]
fn params_go_on_the_wire_as_the_runtime_names_them() {
    assert_eq!(
        wire(&send_params("s", "hi")),
        json!({"sessionId": "s", "prompt": "hi"})
    );
    assert_eq!(
        wire(&steer_params("s", "hi")),
        json!({"sessionId": "s", "prompt": "hi", "mode": "immediate"})
    );
    assert_eq!(wire(&abort_params("s")), json!({"sessionId": "s"}));
    assert_eq!(
        wire(&model_switch_params("s", "m")),
        json!({"sessionId": "s", "modelId": "m"})
    );
    assert_eq!(
        wire(&agent_select_params("s", "a")),
        json!({"sessionId": "s", "name": "a"})
    );
    assert_eq!(wire(&SessionRef::new("s")), json!({"sessionId": "s"}));
    let failed = wire(&ToolAnswer::new("s", "r", &ToolOutcome::failed("gone")));
    assert_eq!(failed["result"]["resultType"], "failure");
    assert_eq!(failed["result"]["error"], "gone");
    let ok = wire(&ToolAnswer::new(
        "s",
        "r",
        &ToolOutcome {
            success: true,
            text: "done".into(),
            error: None,
        },
    ));
    assert_eq!(
        ok["result"],
        json!({"textResultForLlm": "done", "resultType": "success"})
    );
    assert_eq!(
        wire(&PermissionAnswer::new("s", "r", false))["result"]["kind"],
        "reject"
    );
    let token = super::super::session_config::Secret("ghp_x".into());
    let creds = GithubCredentials::new("s", &token);
    assert_eq!(wire(&creds)["credentials"]["token"], "ghp_x");
    assert!(!format!("{creds:?}").contains("ghp_x"));
    assert_eq!(wire(&ConnectParams::default()), json!({}));
}
