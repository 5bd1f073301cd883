// A question the agent asks (`chat/inputRequested`): each question with its
// options as buttons, or a text field; the answer goes back as
// `chat/inputCompleted`.

import { h } from "./dom.js";

/**
 * The question's block; `send` gets the `answers` map when the user answers.
 * @param {any} request the `ChatInputRequest`
 * @param {(answers: Record<string, any>) => void} send
 */
export function questionBlock(request, send) {
  const answers = {};
  const questions = request.questions || [];
  const submit = h("button", { type: "button", class: "answer-submit", on: { click: () => send(answers) } }, "Answer");
  const ready = () => {
    submit.disabled = questions.some((q) => !answers[q.id]);
  };
  const el = h("div", { class: "question", "data-request": request.id },
    request.message ? h("p", { class: "question-message" }, request.message) : null,
    questions.map((q) => questionField(request.id, q, (value) => {
      answers[q.id] = { state: "submitted", value };
      ready();
    })),
    submit);
  ready();
  return el;
}

/**
 * @param {string} requestId
 * @param {any} q one question
 * @param {(value: any) => void} chosen
 */
function questionField(requestId, q, chosen) {
  const id = `q-${requestId}-${q.id}`;
  const title = q.title || q.message;
  if (Array.isArray(q.options)) {
    return h("fieldset", { class: "options" },
      h("legend", {}, title),
      q.options.map((o) => {
        const oid = `${id}-${o.id}`;
        return h("span", {},
          h("input", { type: "radio", name: id, id: oid, value: o.id, on: { change: () => chosen({ kind: "selected", value: o.id }) } }),
          h("label", { for: oid }, o.label));
      }));
  }
  return h("div", { class: "row" },
    h("label", { for: id }, title),
    h("input", { id, on: { input: (e) => chosen({ kind: "text", value: e.target.value }) } }));
}
