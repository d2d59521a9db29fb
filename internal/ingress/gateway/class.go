package gateway

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ControllerName is the spec.controllerName of the GatewayClasses that
// svcnet serves by default (--gateway-controller).
const ControllerName gatewayv1.GatewayController = "svcnet.dev/gateway-controller"

// DefaultClassName is the GatewayClass that svcnet up creates.
const DefaultClassName = "svcnet"

// Serves reports whether the class is ours to serve. controllerName is
// immutable in the API, so a class never changes hands.
func Serves(gc *gatewayv1.GatewayClass, controller gatewayv1.GatewayController) bool {
	return controller != "" && gc.Spec.ControllerName == controller
}

// ClassStatus is the status a served GatewayClass should have, merged
// into the one it has: the Accepted condition for its generation and
// the features svcnet implements. Conditions of other types are kept as
// they are. ok is false when the class's Accepted condition was written
// for a newer generation than the object seen (a stale cache): the
// status must not be written then, as the spec requires.
//
// svcnet takes no parameters, so a class with a parametersRef is not
// accepted (InvalidParameters: an unsupported kind), rather than served
// while ignoring what it asks for.
func ClassStatus(gc *gatewayv1.GatewayClass, now metav1.Time) (status gatewayv1.GatewayClassStatus, ok bool) {
	status = *gc.Status.DeepCopy()
	if c := meta.FindStatusCondition(status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)); c != nil && c.ObservedGeneration > gc.Generation {
		return gc.Status, false
	}
	accepted := metav1.Condition{
		Type:               string(gatewayv1.GatewayClassConditionStatusAccepted),
		Status:             metav1.ConditionTrue,
		Reason:             string(gatewayv1.GatewayClassReasonAccepted),
		Message:            "Accepted by " + string(gc.Spec.ControllerName),
		ObservedGeneration: gc.Generation,
		LastTransitionTime: now,
	}
	if p := gc.Spec.ParametersRef; p != nil {
		accepted.Status = metav1.ConditionFalse
		accepted.Reason = string(gatewayv1.GatewayClassReasonInvalidParameters)
		accepted.Message = "parametersRef " + string(p.Group) + "/" + string(p.Kind) + " " + p.Name + ": svcnet takes no parameters; remove parametersRef"
	}
	// SetStatusCondition keeps the transition time unless the status
	// changes, so an unchanged class gets an equal status.
	meta.SetStatusCondition(&status.Conditions, accepted)
	status.SupportedFeatures = SupportedFeatures()
	return status, true
}
