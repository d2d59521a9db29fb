//go:build race

package server

// raceDetector: the tests run with the race detector.
const raceDetector = true
