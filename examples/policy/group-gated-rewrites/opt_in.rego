# Opting in to `tone` is for copilot-writers only. Refusing the opt-in tells
# the client at once, instead of refusing each rewrite it would send.
package ahp.opt_in

deny contains msg if {
	"tone" in input.sections
	not data.writers.member
	msg := sprintf("opt-in to tone refused: %s is not in the IdP group %s", [data.writers.who, data.writers.group])
}
