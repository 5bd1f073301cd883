//! The stdio MCP server the tests run (`fixtures/mcp/echo_server.py`)
//! speaks MCP as a client sees it: newline-delimited JSON-RPC, the
//! handshake, one tool listed and called, unknown methods refused, every
//! message it received logged to `$MCP_LOG`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// One running server and the ends of its stdio.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Server {
    fn start(log: &Path) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/echo_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .env("MCP_LOG", log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs the MCP fixture (install python3 to run this test)");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line the server writes, as JSON; a server that stays
    /// silent fails the test instead of hanging it.
    async fn reply(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.stdout.next_line())
            .await
            .expect("the server answered within 10 s")
            .unwrap()
            .expect("the server is still running");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let reply = self.reply().await;
        assert_eq!(reply["jsonrpc"], "2.0");
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }
}

#[tokio::test]
async fn a_client_can_initialize_list_and_call_the_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("mcp.jsonl");
    let mut server = Server::start(&log);

    let init = server
        .call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                   "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["capabilities"], json!({"tools": {}}));
    assert_eq!(init["result"]["serverInfo"]["name"], "echo-fixture");

    // A notification gets no answer: the next line answers the next request.
    server
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let list = server.call(2, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "echo_upper");
    assert!(tools[0]["description"]
        .as_str()
        .unwrap()
        .contains("capitals"));
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["text"]["type"],
        "string"
    );

    let call = server
        .call(
            3,
            "tools/call",
            json!({"name": "echo_upper", "arguments": {"text": "hello world"}}),
        )
        .await;
    assert_eq!(
        call["result"],
        json!({"content": [{"type": "text", "text": "UPPER:HELLO WORLD"}]})
    );

    drop(server.stdin);
    let status = server.child.wait().await.unwrap();
    assert!(status.success(), "the server ends cleanly at EOF");
    let logged: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let methods: Vec<&str> = logged
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    assert_eq!(logged[3]["params"]["arguments"]["text"], "hello world");
}

#[tokio::test]
async fn other_methods_and_tools_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Server::start(&tmp.path().join("mcp.jsonl"));
    let discover = server.call(1, "server/discover", json!({})).await;
    assert_eq!(discover["error"]["code"], -32601);
    let other = server.call(2, "resources/list", json!({})).await;
    assert_eq!(other["error"]["code"], -32601);
    let unknown = server
        .call(3, "tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    server.send(json!("not a request")).await;
    assert_eq!(server.reply().await["error"]["code"], -32600);
    server.stdin.write_all(b"{not json\n").await.unwrap();
    assert_eq!(server.reply().await["error"]["code"], -32700);
}
