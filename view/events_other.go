//go:build !unix

package view

import (
	"errors"
	"os"
)

const canMap = false

func mapFile(*os.File, int) ([]byte, error) { return nil, errors.New("no mmap") }

func unmap([]byte) {}
