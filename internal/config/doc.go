// Package config defines Raven's Options, reads them from a YAML file, lets command-line flags override
// them, and validates the result. Options are passed down explicitly; nothing here is global.
package config
