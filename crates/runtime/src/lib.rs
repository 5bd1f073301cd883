//! South side: the Copilot CLI in server mode, over stdio or TCP. Speaks only
//! the runtime's wire, typed from its schema ([`schema`], generated) and, for
//! what the schema leaves out, by hand ([`requests`], [`session_config`]);
//! knows nothing of AHP. JSON exists only in [`runtime_conn`]'s frames.
mod ahp_host;
mod app_wire;
mod calls;
mod codec;
mod events;
mod mismatch;
mod process;
mod repeats;
mod requests;
mod runtime_conn;
mod runtime_error;
mod schema;
mod session_config;
mod session_customizations;
mod stderr_tail;
pub use ahp_host::{spawn_ahp_host, AhpHostProcess};
pub use app_wire::{
    AboutSession, AppAgent, AppConnectParams, AppMcpServer, AppSend, AppSessionParams,
    AppSystemMessage, Envelope, TransformSections,
};
pub use calls::{
    abort_params, agent_deselect_params, agent_select_params, model_switch_params, send_params,
    steer_params, AgentDeselect, AgentSelect, AnswerPermission, AnswerToolCall, GithubCredentials,
    Method, ModelSwitch, PermissionAnswer, Ping, SessionAbort, SessionCreate, SessionDestroy,
    SessionRef, SessionResume, SessionSend, SetGithubCredentials, ToolAnswer, ToolOutcome,
};
pub use codec::{ContentLengthCodec, FrameError};
pub use events::{Arrived, McpServerStatus, PermissionRequest, RuntimeEvent, Usage, SESSION_EVENT};
pub use mismatch::Mismatch;
pub use process::{start_runtime, Reach};
pub use repeats::Repeats;
pub use requests::{RuntimeAnswer, RuntimeRequest, UserInputAnswer};
pub use runtime_conn::{RuntimeConn, RuntimeHandler, RuntimeReplyFuture};
pub use session_config::{
    ExternalTool, ModelProvider, Secret, SectionAction, SectionOverride, SessionConfig,
    SystemMessage,
};
pub use session_customizations::{CustomAgent, McpServerSpec, RuntimeCustomizations};

pub use runtime_error::RuntimeError;
